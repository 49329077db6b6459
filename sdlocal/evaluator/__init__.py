"""The rule side of sdlocal: smdebug-compatible rules, the built-in rules, and the evaluator loop
that runs one rule against one (live) trial and reports SageMaker's rule statuses.

`python -m sdlocal.evaluator` runs one rule for one job from the environment contract (contract.py);
`sdlocal.evaluator.api.evaluate_trial` evaluates a finished trial in-process.
"""
from __future__ import annotations

from sdlocal.evaluator.errors import (
    ContractError,
    CustomRuleError,
    EvaluatorError,
    RuleParameterError,
    UnknownRuleError,
)
from sdlocal.evaluator.profiler_rule import ProfilerRule
from sdlocal.evaluator.profiler_trial import ProfilerTrial
from sdlocal.evaluator.rule import RequiredTensors, Rule, Verdict
from sdlocal.evaluator.status import RuleStatus, Status, read_status, write_status

__all__ = [
    "ContractError",
    "CustomRuleError",
    "EvaluatorError",
    "ProfilerRule",
    "ProfilerTrial",
    "RequiredTensors",
    "Rule",
    "RuleParameterError",
    "RuleStatus",
    "Status",
    "UnknownRuleError",
    "Verdict",
    "read_status",
    "write_status",
]
