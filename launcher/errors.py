"""The launcher's one error hierarchy; `sdlocal.launcher.cli` turns these into one-line CLI errors."""
from __future__ import annotations


class LauncherError(Exception):
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
