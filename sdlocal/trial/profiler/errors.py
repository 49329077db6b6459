"""Errors and damage reports of the profiler reader (part of the trial package's hierarchy)."""
from __future__ import annotations

from dataclasses import dataclass

from sdlocal.trial.errors import TrialError


@dataclass(frozen=True)
class Damage:
    """A part of a profiler file that could not be read: `line` is 1-based (0: the whole file)."""

    key: str
    line: int
    message: str

    def __str__(self) -> str:
        where = f"{self.key} line {self.line}" if self.line else self.key
        return f"{where}: {self.message}"


class ProfilerDataError(TrialError):
    """Profiler output is damaged beyond a half-written last line (raised in strict mode only)."""

    def __init__(self, damage: Damage) -> None:
        self.damage = damage
        super().__init__(str(damage))
