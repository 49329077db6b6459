"""The smdebug on-storage trial format: writing it (TrialWriter) and reading it (create_trial)."""
from __future__ import annotations

from trial.collection import Collection, CollectionsFile, ReductionConfig, SaveConfigMode
from trial.errors import (
    CorruptRecordError,
    MissingCollectionFiles,
    NoMoreData,
    ShapeUnavailableForStep,
    StepNotYetAvailable,
    StepUnavailable,
    StorageError,
    TensorUnavailable,
    TensorUnavailableForStep,
    TrialError,
)
from trial.modes import ModeKeys
from trial.refresh import no_refresh
from trial.steps import StepState
from trial.tensor import Tensor
from trial.trial import Trial, create_trial
from trial.writer import TrialWriter

__all__ = [
    "create_trial",
    "no_refresh",
    "Collection",
    "CollectionsFile",
    "CorruptRecordError",
    "MissingCollectionFiles",
    "ModeKeys",
    "NoMoreData",
    "ReductionConfig",
    "SaveConfigMode",
    "ShapeUnavailableForStep",
    "StepNotYetAvailable",
    "StepState",
    "StepUnavailable",
    "StorageError",
    "TensorUnavailable",
    "TensorUnavailableForStep",
    "Tensor",
    "Trial",
    "TrialError",
    "TrialWriter",
]
