"""smdebug.rules.req_tensors: what a rule needs at a step."""
from __future__ import annotations

from sdlocal.evaluator.rule import RequiredTensors, RequiredTensorsForTrial

__all__ = ["RequiredTensors", "RequiredTensorsForTrial"]
