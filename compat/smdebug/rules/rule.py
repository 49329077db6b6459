"""smdebug.rules.rule: the Rule base class custom rules derive from."""
from __future__ import annotations

from evaluator.rule import Rule

__all__ = ["Rule"]
