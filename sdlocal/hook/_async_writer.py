"""A background thread that runs write jobs in order, so serialization, CRCs and file I/O stay off
the training thread. One thread, in order: a step's index file must never appear before an earlier
step's (a live reader takes the steps it sees as the steps written so far).

Each job comes with the snapshots it reads (`held`, hook._copier): they are released once the job
has run, failed or been skipped, so their buffers and budget bytes always come back. Memory is
bounded in bytes by the hook's ByteBudget (hook._budget) and the queue also in jobs
(`max_pending`); the time the training thread waits for room in either is counted in the budget
and reported by the hook. The first failure is kept, later jobs are dropped (their snapshots
released), and `close()` raises it.

`InlineWriter` runs each job at once on the caller's thread: the synchronous reference path.
"""
from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence

from sdlocal.hook._budget import ByteBudget
from sdlocal.hook._copier import Snapshot
from sdlocal.hook.errors import HookWriteError

logger = logging.getLogger(__name__)

Job = Callable[[], None]
_STOP = object()


def _release(held: Sequence[Snapshot]) -> None:
    for snap in held:
        snap.release()


class AsyncWriter:
    def __init__(self, max_pending: int = 16, name: str = "sdlocal-hook-writer",
                 budget: ByteBudget | None = None) -> None:
        self._queue: queue.Queue[object] = queue.Queue(maxsize=max_pending)
        self._budget = budget
        self._error: BaseException | None = None
        self._closed = False
        # Daemon: a non-daemon thread would be joined before atexit handlers run, and close()
        # (called from atexit) is what tells it to stop.
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def error(self) -> BaseException | None:
        return self._error

    def submit(self, job: Job, held: Sequence[Snapshot] = ()) -> None:
        """Queue a job (blocks while the queue is full, up to the budget's deadline). Ignored
        once a job has failed (its snapshots are released at once)."""
        if self._closed:
            _release(held)
            raise HookWriteError("the writer is closed")
        if self._error is not None:
            _release(held)
            return
        for snap in held:
            snap.queued()
        item = (job, held)
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            self._put_waiting(item)

    def _put_waiting(self, item: tuple[Job, Sequence[Snapshot]]) -> None:
        deadline_s = self._budget.deadline_s if self._budget is not None else 600.0
        began = time.monotonic()
        try:
            self._queue.put(item, timeout=deadline_s)
        except queue.Full:
            _release(item[1])
            raise HookWriteError(f"the hook's writer took no job within {deadline_s:.0f} s: is the output "
                                 "folder's file system hung?") from None
        if self._budget is not None:
            self._budget.add_wait(time.monotonic() - began)

    def close(self, timeout: float | None = 600.0) -> None:
        """Run every queued job, stop the thread, raise HookWriteError if a job failed."""
        if not self._closed:
            self._closed = True
            self._queue.put(_STOP)
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise HookWriteError(f"the background writer did not finish within {timeout} s")
        if self._error is not None:
            raise HookWriteError(f"writing the trial failed: {self._error!r}") from self._error

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            job: Job
            held: Sequence[Snapshot]
            job, held = item  # type: ignore[misc]
            try:
                if self._error is None:
                    job()
            except BaseException as e:  # noqa: B036 - kept and re-raised by close()
                logger.error("sdlocal hook: writing the trial failed: %r", e)
                self._error = e
                if self._budget is not None:
                    self._budget.break_waits()  # nothing more will be written: the training never waits
            finally:
                _release(held)


class InlineWriter:
    """The synchronous reference: each job runs in `submit`, on the caller's thread."""

    def __init__(self) -> None:
        self._error: BaseException | None = None
        self._closed = False

    @property
    def error(self) -> BaseException | None:
        return self._error

    def submit(self, job: Job, held: Sequence[Snapshot] = ()) -> None:
        try:
            if self._closed:
                raise HookWriteError("the writer is closed")
            if self._error is None:
                job()
        except HookWriteError:
            raise
        except BaseException as e:  # noqa: B036 - kept and re-raised by close()
            logger.error("sdlocal hook: writing the trial failed: %r", e)
            self._error = e
        finally:
            _release(held)

    def close(self, timeout: float | None = None) -> None:
        self._closed = True
        if self._error is not None:
            raise HookWriteError(f"writing the trial failed: {self._error!r}") from self._error
