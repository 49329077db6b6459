"""The hook's memory bound: bytes of tensor copies alive at once, with back-pressure.

Every copy of a saved tensor (a host buffer, pinned or not, and on CUDA the device snapshot it is
copied from) is counted from the moment the training thread takes it until the writer thread has
written it and handed its buffer back. `acquire` blocks the training thread while taking the next
copy would go over the limit AND the writer still holds queued bytes it will free: so memory never
grows past the limit because the disk is slow. It does not block when nothing is queued (the step
being recorded is itself larger than the limit: waiting could never end); that case is allowed,
said once, and shows in `high_water`.

The waits are added up (`waited_s`, `waits`) and reported once by the hook when it closes (and
once when the first wait happens), not per step. Every wait has a deadline: a writer that frees
nothing within `deadline_s` is stuck (a hung file system), and the training gets a HookWriteError
rather than hanging for ever.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sdlocal.hook.errors import HookWriteError


@dataclass(frozen=True)
class BudgetStats:
    limit: int
    high_water: int  # the most bytes held at once (live copies and free pooled buffers)
    waited_s: float  # total time the training thread waited for the writer
    waits: int  # how many acquire calls waited
    over_limit: int  # acquire calls that went over the limit with nothing queued (a step larger than the limit)


class ByteBudget:
    """Counts held and queued bytes. `held`: every live copy (being recorded, queued, being
    written); `queued`: the part handed to the writer, which it will free. Thread-safe."""

    def __init__(self, limit: int, deadline_s: float = 600.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if limit < 1:
            raise ValueError(f"the queue limit must be at least 1 byte, got {limit}")
        self.limit = limit
        self.deadline_s = deadline_s
        self._clock = clock
        self._cond = threading.Condition()
        self._held = 0
        self._queued = 0
        self._pooled = 0  # free buffers kept for reuse (hook._copier.HostPool): memory too
        self._high_water = 0
        self._waited_s = 0.0
        self._waits = 0
        self._over = 0
        self._broken = False  # the writer failed: nothing will be freed by it any more, never wait
        self.on_first_wait: Callable[[], None] | None = None

    @property
    def held(self) -> int:
        return self._held

    @property
    def queued(self) -> int:
        return self._queued

    @property
    def pooled(self) -> int:
        return self._pooled

    def stats(self) -> BudgetStats:
        with self._cond:
            return BudgetStats(self.limit, self._high_water, self._waited_s, self._waits, self._over)

    def acquire(self, nbytes: int, from_pool: bool = False) -> None:
        """Count `nbytes` more as held; first wait (up to the deadline) while that would exceed
        the limit and the writer has queued bytes to free. `from_pool`: the bytes will be a pool's
        buffer (HostPool.take updates the high-water mark once the buffer has left the pool)."""
        first_wait = False
        with self._cond:
            if self._held + nbytes > self.limit and self._queued > 0 and not self._broken:
                began = self._clock()
                deadline = began + self.deadline_s
                while self._held + nbytes > self.limit and self._queued > 0 and not self._broken:
                    left = deadline - self._clock()
                    if left <= 0:
                        raise HookWriteError(
                            f"the hook's writer freed nothing within {self.deadline_s:.0f} s while the training "
                            f"waited for room ({self._queued} bytes queued, limit {self.limit}): is the "
                            "output folder's file system hung?")
                    self._cond.wait(left)
                self._waited_s += self._clock() - began
                self._waits += 1
                first_wait = self._waits == 1
            if self._held + nbytes > self.limit:
                self._over += 1
            self._held += nbytes
            if not from_pool:
                self._high_water = max(self._high_water, self._held + self._pooled)
        if first_wait and self.on_first_wait is not None:
            self.on_first_wait()

    def add_wait(self, seconds: float) -> None:
        """A wait for room in the writer's job queue (counted with the byte waits)."""
        with self._cond:
            self._waited_s += seconds
            self._waits += 1
            first_wait = self._waits == 1
        if first_wait and self.on_first_wait is not None:
            self.on_first_wait()

    def queue(self, nbytes: int) -> None:
        """`nbytes` of held bytes were handed to the writer."""
        with self._cond:
            self._queued += nbytes

    def pool_change(self, delta: int) -> None:
        """The pool kept (delta > 0) or dropped/handed out (delta < 0) free buffers; 0: it
        allocated a new one (already counted as held). A buffer kept is still counted as held
        until its snapshot's release follows: that moment is not a high-water mark."""
        with self._cond:
            self._pooled += delta
            if delta <= 0:
                self._high_water = max(self._high_water, self._held + self._pooled)

    def release(self, nbytes: int, queued: bool) -> None:
        """`nbytes` are free again (`queued`: they had been handed to the writer)."""
        with self._cond:
            self._held -= nbytes
            if queued:
                self._queued -= nbytes
            self._cond.notify_all()

    def break_waits(self) -> None:
        """The writer failed or stopped: no acquire waits any more (the copies are dropped)."""
        with self._cond:
            self._broken = True
            self._cond.notify_all()
