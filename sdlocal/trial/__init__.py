"""The smdebug on-storage trial format: writing it (TrialWriter) and reading it (create_trial)."""
from __future__ import annotations

from sdlocal.trial.collection import Collection, CollectionsFile, ReductionConfig, SaveConfigMode
from sdlocal.trial.errors import (
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
from sdlocal.trial.modes import ModeKeys
from sdlocal.trial.refresh import no_refresh
from sdlocal.trial.steps import StepState
from sdlocal.trial.tensor import Tensor
from sdlocal.trial.trial import Trial, create_trial
from sdlocal.trial.writer import END_MARKER, TrialWriter

__all__ = [
    "END_MARKER",
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
