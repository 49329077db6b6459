"""Every wait of the launcher goes through `wait_for`, and every wait has a `Deadline`.

    outcome = wait_for(lambda: handle.poll(), Deadline.after(30.0), pause=handle.wait, stop=stop)
    if outcome.timed_out: ...      # outcome.value is what `ready` returned once it was ready

`ready` is called first, then between calls the helper blocks in `pause(seconds)` for at most
`interval` seconds and never past the deadline: `pause` is what the caller can block on (a
process's wait, an event's wait); by default `stop.wait` when a stop event is given (so a stop
ends the wait at once), else `sleep`. A value other than None and False means ready.

Clock and sleep are injected (tests run waits on a fake clock). `Deadline.never()` exists for the
one wait whose limit is the user's to set and absent by default on SageMaker too; say why at the
call site.
"""
from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Deadline:
    at: float  # on `clock`; math.inf: never
    clock: Callable[[], float] = time.monotonic

    @classmethod
    def after(cls, seconds: float, clock: Callable[[], float] = time.monotonic) -> Deadline:
        if not seconds >= 0:  # also refuses NaN
            raise ValueError(f"a deadline needs a number of seconds >= 0, not {seconds!r}")
        return cls(clock() + seconds, clock)

    @classmethod
    def never(cls, clock: Callable[[], float] = time.monotonic) -> Deadline:
        return cls(math.inf, clock)

    def remaining(self) -> float:
        return max(0.0, self.at - self.clock())

    def expired(self) -> bool:
        return self.clock() >= self.at


@dataclass(frozen=True)
class Waited(Generic[T]):
    """How a wait ended: `value` (what `ready` returned) when ready, else timed out or stopped."""

    value: T | None
    timed_out: bool = False
    stopped: bool = False

    @property
    def ready(self) -> bool:
        return not (self.timed_out or self.stopped)


def wait_for(
    ready: Callable[[], T | None],
    deadline: Deadline,
    *,
    interval: float = 0.2,
    pause: Callable[[float], object] | None = None,
    stop: threading.Event | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Waited[T]:
    """Call `ready` until it returns a value (not None, not False), `stop` is set or the deadline
    passes, pausing at most `interval` seconds between calls."""
    if not interval > 0:
        raise ValueError(f"interval must be > 0, not {interval!r}")
    if pause is None:
        pause = stop.wait if stop is not None else sleep
    while True:
        value = ready()
        if value is not None and value is not False:
            return Waited(value)
        if stop is not None and stop.is_set():
            return Waited(None, stopped=True)
        left = deadline.remaining()
        if left <= 0:
            return Waited(None, timed_out=True)
        pause(min(interval, left))
