"""smdebug.exceptions: every exception name of smdebug 1.0, with its constructor and message. They
are the classes sdlocal's reader and rule API raise (trial/errors.py), so `except` clauses written
for smdebug catch them; `SMDebugError` is their common base."""
from __future__ import annotations

from sdlocal.trial.errors import (
    IndexReaderException,
    InsufficientInformationForRuleInvocation,
    InvalidCollectionConfiguration,
    InvalidWorker,
    MissingCollectionFiles,
    NoMoreData,
    NoMoreProfilerData,
    RuleEvaluationConditionMet,
    ShapeUnavailableForStep,
    SMDebugCustomerError,
    SMDebugError,
    SMDebugNotImplementedError,
    SMDebugRuntimeError,
    SMDebugTypeError,
    SMDebugValueError,
    StepNotYetAvailable,
    StepUnavailable,
    TensorUnavailable,
    TensorUnavailableForStep,
)
from sdlocal.trial.modes import ModeKeys as modes

__all__ = [
    "IndexReaderException",
    "InsufficientInformationForRuleInvocation",
    "InvalidCollectionConfiguration",
    "InvalidWorker",
    "MissingCollectionFiles",
    "NoMoreData",
    "NoMoreProfilerData",
    "RuleEvaluationConditionMet",
    "SMDebugCustomerError",
    "SMDebugError",
    "SMDebugNotImplementedError",
    "SMDebugRuntimeError",
    "SMDebugTypeError",
    "SMDebugValueError",
    "ShapeUnavailableForStep",
    "StepNotYetAvailable",
    "StepUnavailable",
    "TensorUnavailable",
    "TensorUnavailableForStep",
    "modes",
]
