"""The trial package's errors: one base class, with every exception name of `smdebug.exceptions`
(smdebug 1.0) under it, with smdebug's constructor signatures and messages, so that code written
against smdebug catches what sdlocal raises. `SMDebugError` is the same class as `TrialError`."""
from __future__ import annotations

from enum import Enum


def mode_name(mode: object) -> str:
    """A mode as smdebug's messages print it ("TRAIN"): an enum's name; None is GLOBAL."""
    if mode is None:
        return "GLOBAL"
    if isinstance(mode, Enum):
        return mode.name
    return str(mode).rsplit(".", 1)[-1]


def one_line(error: BaseException, limit: int | None = None) -> str:
    """An error as one line: its message with every run of whitespace (line breaks too) made one
    space, cut at `limit` characters; its type's name when it has no message. Every layer of
    sdlocal shows errors through this (CLI lines, statuses, warnings)."""
    text = " ".join(str(error).split())
    if limit is not None and len(text) > limit:
        text = text[: limit - 3] + "..."
    return text or type(error).__name__


class OneLineError(Exception):
    """The base of sdlocal's error hierarchies (trial, hook, evaluator, launcher): prints itself as
    one line naming its culprit, so whoever shows it (the CLI, a status, a log) shows it as is."""

    exit_code = 1  # the CLI's exit status for it

    def __str__(self) -> str:
        return " ".join(super().__str__().split())


class TrialError(OneLineError):
    """Base of every error raised by the trial package (smdebug's `SMDebugError`)."""


SMDebugError = TrialError


class SMDebugCustomerError(TrialError):
    pass


class SMDebugTypeError(TrialError, TypeError):
    pass


class SMDebugRuntimeError(TrialError, RuntimeError):
    pass


class SMDebugNotImplementedError(TrialError, NotImplementedError):
    pass


class SMDebugValueError(TrialError, ValueError):
    pass


class CorruptRecordError(TrialError):
    """A framed record (or an index file) cannot be decoded (sdlocal's own)."""

    def __init__(self, message: str, *, where: str = "", offset: int | None = None) -> None:
        self.where = where
        self.offset = offset
        prefix = where
        if offset is not None:
            prefix = f"{where} at offset {offset}" if where else f"offset {offset}"
        super().__init__(f"{prefix}: {message}" if prefix else message)


class StorageError(TrialError):
    """Reading or writing the trial's storage failed (sdlocal's own)."""


class InvalidCollectionConfiguration(TrialError):
    def __init__(self, c_name: str) -> None:
        self.c_name = c_name
        super().__init__(f"Collection {c_name} has not been configured. Please fill in tensor_name or include_regex")


class IndexReaderException(TrialError):
    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


class TensorUnavailable(TrialError):
    """The trial has no tensor with this name."""

    def __init__(self, tname: str) -> None:
        self.tname = tname
        super().__init__(f"Tensor {tname} was not saved.")


class TensorUnavailableForStep(TrialError):
    """The tensor was not saved for this step (or mode/worker), or its events file is gone."""

    def __init__(self, tname: str, step: int, mode: object = None, has_reductions: bool = False) -> None:
        self.tname = tname
        self.step = step
        self.mode = mode
        self.has_reductions = has_reductions
        msg = f"Value for tensor {tname} is not available for step {step} with mode {mode_name(mode)} as it was not saved."
        if has_reductions:
            msg += " This tensor has reductions saved for this step. You might want to query for the reductions."
        super().__init__(msg)



class MissingEventsFile(TensorUnavailableForStep):
    """The trial's index names an events file that is not there: its data is lost (deleted, or
    never uploaded), not merely unsaved. A TensorUnavailableForStep for code written against
    smdebug, with a message that names the file; sdlocal's evaluator ends the rule Error with it."""

    def __init__(self, where: str, tname: str, step: int, mode: object = None) -> None:
        super().__init__(tname, step, mode)
        self.where = where
        Exception.__init__(self, f"{where} is missing: the trial's index names it for step {step} "
                                 f"(tensor {tname}), so that step's data cannot be read")

class ShapeUnavailableForStep(TrialError):
    def __init__(self, tname: str, step: int, mode: object = None) -> None:
        self.tname = tname
        self.step = step
        self.mode = mode
        super().__init__(f"Shape for tensor {tname} is not available for step {step} with mode {mode_name(mode)} as it was not saved.")


class StepUnavailable(TrialError):
    """The step was never written, and never will be (a later step is complete, or training ended)."""

    def __init__(self, step: int, mode: object = None) -> None:
        self.step = step
        self.mode = mode
        super().__init__(f"Step {step} of mode {mode_name(mode)} is not available as it was not saved")


class StepNotYetAvailable(TrialError):
    """The step may still be written: training has not reached it yet."""

    def __init__(self, step: int, mode: object = None) -> None:
        self.step = step
        self.mode = mode
        super().__init__(f"Step {step} of mode {mode_name(mode)} not yet available")


class NoMoreData(TrialError):
    """Training has ended and the requested step will never come."""

    def __init__(self, step: int, mode: object = None, last_step: int = -1) -> None:
        self.step = step
        self.mode = mode
        self.last_step = last_step
        self.msg = (
            f"Looking for step {step} of mode {mode_name(mode)} and reached end of training. "
            f"Max step available is {last_step}"
        )
        super().__init__(self.msg)


class MissingCollectionFiles(TrialError):
    """The collections files did not appear (training ended first, or the deadline passed)."""

    def __init__(self, message: str = "Training job has ended. All the collection files could not be loaded") -> None:
        super().__init__(message)


class InvalidWorker(TrialError):
    def __init__(self, worker: str) -> None:
        self.worker = worker
        super().__init__(f"Invalid Worker: {worker}")


class NoMoreProfilerData(TrialError):
    def __init__(self, timestamp: object) -> None:
        self.timestamp = timestamp
        self.msg = f"Looking for timestamp {timestamp} and reached end of training."
        super().__init__(self.msg)


class RuleEvaluationConditionMet(TrialError):
    """A rule's condition is met at `step` (smdebug's signal; `end_of_rule`: stop invoking it)."""

    def __init__(self, rule_name: str, step: int, end_of_rule: bool = False) -> None:
        self.rule_name = rule_name
        self.step = step
        self.end_of_rule = end_of_rule
        super().__init__(f"Evaluation of the rule {rule_name} at step {step} resulted in the condition being met")


class InsufficientInformationForRuleInvocation(TrialError):
    def __init__(self, rule_name: str, message: str) -> None:
        self.rule_name = rule_name
        self.message = message
        super().__init__(f"Insufficient information to invoke rule {rule_name}: {message}")
