"""The smdebug on-storage trial format: writing it (TrialWriter) and reading it (create_trial)."""
from __future__ import annotations

from trial.collection import Collection, CollectionsFile, ReductionConfig, SaveConfigMode
from trial.errors import (
    CorruptRecordError,
    MissingCollectionFiles,
    NoMoreData,
    StepNotYetAvailable,
    StepUnavailable,
    StorageError,
    TensorUnavailable,
    TensorUnavailableForStep,
    TrialError,
)
from trial.modes import ModeKeys
from trial.writer import TrialWriter

__all__ = [
    "Collection",
    "CollectionsFile",
    "CorruptRecordError",
    "MissingCollectionFiles",
    "ModeKeys",
    "NoMoreData",
    "ReductionConfig",
    "SaveConfigMode",
    "StepNotYetAvailable",
    "StepUnavailable",
    "StorageError",
    "TensorUnavailable",
    "TensorUnavailableForStep",
    "TrialError",
    "TrialWriter",
]
