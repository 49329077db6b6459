"""smdebug.exceptions: smdebug's exception names, raised by sdlocal's reader and rule API."""
from __future__ import annotations

from evaluator.rule import RuleEvaluationConditionMet
from trial.errors import (
    MissingCollectionFiles,
    NoMoreData,
    StepNotYetAvailable,
    StepUnavailable,
    TensorUnavailable,
    TensorUnavailableForStep,
)

__all__ = [
    "MissingCollectionFiles",
    "NoMoreData",
    "RuleEvaluationConditionMet",
    "StepNotYetAvailable",
    "StepUnavailable",
    "TensorUnavailable",
    "TensorUnavailableForStep",
]
