"""The trial package's errors (smdebug's exception names, one base class)."""
from __future__ import annotations


class TrialError(Exception):
    """Base of every error raised by the trial package."""


class CorruptRecordError(TrialError):
    """A framed record (or an index file) cannot be decoded."""

    def __init__(self, message: str, *, where: str = "", offset: int | None = None) -> None:
        self.where = where
        self.offset = offset
        prefix = where
        if offset is not None:
            prefix = f"{where} at offset {offset}" if where else f"offset {offset}"
        super().__init__(f"{prefix}: {message}" if prefix else message)


class StorageError(TrialError):
    """Reading or writing the trial's storage failed."""


class TensorUnavailable(TrialError):
    """The trial has no tensor with this name."""

    def __init__(self, tname: str) -> None:
        self.tname = tname
        super().__init__(f"Tensor {tname} can not be found in the trial")


class TensorUnavailableForStep(TrialError):
    """The tensor was not saved for this step (or mode/worker)."""

    def __init__(self, tname: str, step: int, mode: object = None, has_reductions: bool = False) -> None:
        self.tname = tname
        self.step = step
        self.mode = mode
        self.has_reductions = has_reductions
        msg = f"Value for tensor {tname} is not available for step {step} with mode {mode}"
        if has_reductions:
            msg += " as it was saved as a reduced tensor only"
        super().__init__(msg)


class StepUnavailable(TrialError):
    """The step was never written (and training has moved past it or ended)."""

    def __init__(self, step: int, mode: object = None) -> None:
        self.step = step
        self.mode = mode
        super().__init__(f"Step {step} of mode {mode} is not available")


class StepNotYetAvailable(TrialError):
    """The step may still be written: training has not reached it yet."""

    def __init__(self, step: int, mode: object = None) -> None:
        self.step = step
        self.mode = mode
        super().__init__(f"Step {step} of mode {mode} not yet available")


class NoMoreData(TrialError):
    """Training has ended and the requested step will never come."""


class MissingCollectionFiles(TrialError):
    """The collections file did not appear (training ended first, or the deadline passed)."""

    def __init__(self, message: str = "Training job has ended. All the collection files could not be loaded") -> None:
        super().__init__(message)
