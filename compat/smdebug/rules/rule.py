"""smdebug.rules.rule: the Rule base class custom rules derive from (`invoke(step)` raises
RuleEvaluationConditionMet as smdebug's does; sdlocal's evaluator judges steps itself)."""
from __future__ import annotations

from sdlocal.evaluator.rule import Rule

__all__ = ["Rule"]
