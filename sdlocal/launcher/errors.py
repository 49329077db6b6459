"""The launcher's one error hierarchy, and how the CLI shows any error in one line.

Every error sdlocal raises on purpose derives from `sdlocal.trial.errors.OneLineError` (this package's
`LauncherError`, and the trial, hook and evaluator packages' bases): it prints itself as one line
naming its culprit (a field, a file, an S3 key) and carries its exit code. `describe` turns any
other exception into such a line too: S3 and Docker errors are named after their service; anything
else is unexpected and keeps its type (`--debug` shows the traceback)."""
from __future__ import annotations

from sdlocal.trial.errors import OneLineError, one_line


class LauncherError(OneLineError):
    """Base of every error the launcher raises on purpose."""


class SpecError(LauncherError):
    """The job request is invalid. `field` names the offending field (SageMaker-style path)."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}" if field else message)


class S3EndpointError(LauncherError):
    """The S3 endpoint (embedded server or configured one) could not be reached or started."""


class RuntimeLaunchError(LauncherError):
    """A training or rule process could not be started."""


class JobError(LauncherError):
    """Running a job failed for a reason other than the training script's own exit status."""


def describe(error: BaseException) -> str:
    """Any error as the CLI's one line (without the `Error: ` click puts before it)."""
    from botocore.exceptions import BotoCoreError, ClientError

    message = one_line(error)
    if isinstance(error, OneLineError):
        return message
    if isinstance(error, BotoCoreError | ClientError):
        return f"S3: {message}"  # name the culprit: the S3 endpoint, not sdlocal
    if type(error).__module__.startswith("docker"):
        return f"Docker: {message}"
    if isinstance(error, OSError | RecursionError | MemoryError | UnicodeError):
        return f"{type(error).__name__}: {message}"  # OSError's text names its path
    return f"{type(error).__name__}: {message} (unexpected: `sdlocal --debug ...` shows the traceback)"


def exit_code(error: BaseException) -> int:
    return getattr(error, "exit_code", 1) if isinstance(error, OneLineError) else 1
