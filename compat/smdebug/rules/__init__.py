"""smdebug.rules: the Rule base class, RequiredTensors and invoke_rule."""
from __future__ import annotations

from smdebug.rules.req_tensors import RequiredTensors
from smdebug.rules.rule import Rule

__all__ = ["RequiredTensors", "Rule"]
