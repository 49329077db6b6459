"""The hook package's errors: one base, converted to a one-line CLI error by the launcher."""
from __future__ import annotations

from sdlocal.trial.errors import OneLineError


class HookError(OneLineError):
    """Base of every error the training-side hook raises."""


class HookConfigError(HookError, ValueError):
    """debughookconfig.json (or a HookConfig dict, or a config object of the smdebug API) has a bad
    value; the message names the field. A ValueError too, as smdebug's SMDebugValueError."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class HookWriteError(HookError):
    """The background writer failed; raised by Hook.close() with the first failure as its cause."""
