"""How many jobs `sdlocal serve` runs at once: `JobQueue`.

At most `limit` jobs run (default: half the CPUs this process may use, at least 1; `serve
--max-concurrent-jobs`, `SDLOCAL_MAX_CONCURRENT_JOBS`); the jobs created beyond it wait in the order
they were created and start as running ones end. A waiting job reads as SageMaker shows a job that
waits for capacity: TrainingJobStatus InProgress, SecondaryStatus Starting, a StatusMessage that
says it waits and for what. A waiting job that is stopped ends Stopped without starting.

Every method holds the queue's lock only to move jobs between its lists: starting a job's thread
and telling a job its place happen outside it, and a Describe never takes it.
"""
from __future__ import annotations

import os
import threading
from collections import deque
from typing import Protocol


class Queued(Protocol):
    @property
    def name(self) -> str: ...

    def launch(self) -> None: ...

    def waiting(self, message: str) -> None: ...


def default_limit() -> int:
    """Half the CPUs this process may run on (a job is its training plus one evaluator per rule)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 2
    return max(1, cpus // 2)


class JobQueue:
    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit or default_limit()
        self._lock = threading.Lock()
        self._running: set[str] = set()
        self._waiting: deque[Queued] = deque()

    def submit(self, job: Queued) -> None:
        """Start `job` now if there is room, else queue it behind the others."""
        with self._lock:
            start = len(self._running) < self.limit and not self._waiting
            if start:
                self._running.add(job.name)
            else:
                self._waiting.append(job)
                place = len(self._waiting)
        if start:
            job.launch()
        else:
            job.waiting(self._message(place))

    def done(self, job: Queued) -> None:
        """`job` ended: the next ones start, the others are told their new place."""
        with self._lock:
            self._running.discard(job.name)
            started = []
            while self._waiting and len(self._running) < self.limit:
                next_job = self._waiting.popleft()
                self._running.add(next_job.name)
                started.append(next_job)
            still = list(self._waiting)
        for next_job in started:
            next_job.launch()
        for place, waiting in enumerate(still, 1):
            waiting.waiting(self._message(place))

    def withdraw(self, job: Queued) -> bool:
        """Take a waiting job out (it was stopped); False when it is not waiting (it runs or ran)."""
        with self._lock:
            try:
                self._waiting.remove(job)
            except ValueError:
                return False
            still = list(self._waiting)
        for place, waiting in enumerate(still, 1):
            waiting.waiting(self._message(place))
        return True

    def _message(self, place: int) -> str:
        ahead = f"{place - 1} job(s) ahead of it" if place > 1 else "next to start"
        return (f"Waiting for capacity: {ahead}; sdlocal serve runs at most {self.limit} job(s) at once "
                "(--max-concurrent-jobs, SDLOCAL_MAX_CONCURRENT_JOBS)")

    @property
    def counts(self) -> tuple[int, int]:
        """(running, waiting)."""
        with self._lock:
            return len(self._running), len(self._waiting)
