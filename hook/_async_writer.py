"""A background thread that runs write jobs in order, so serialization and file I/O stay off the
training thread. The queue is bounded: a writer that falls behind slows training down rather than
filling memory. The first failure is kept, later jobs are dropped, and `close()` raises it."""
from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from sdlocal.hook.errors import HookWriteError

logger = logging.getLogger(__name__)

Job = Callable[[], None]
_STOP = object()


class AsyncWriter:
    def __init__(self, max_pending: int = 16, name: str = "sdlocal-hook-writer") -> None:
        self._queue: queue.Queue[object] = queue.Queue(maxsize=max_pending)
        self._error: BaseException | None = None
        self._closed = False
        # Daemon: a non-daemon thread would be joined before atexit handlers run, and close()
        # (called from atexit) is what tells it to stop.
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def error(self) -> BaseException | None:
        return self._error

    def submit(self, job: Job) -> None:
        """Queue a job (blocks while the queue is full). Ignored once a job has failed."""
        if self._closed:
            raise HookWriteError("the writer is closed")
        if self._error is not None:
            return
        self._queue.put(job)

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
            job = self._queue.get()
            if job is _STOP:
                return
            if self._error is not None:
                continue
            try:
                job()  # type: ignore[operator]
            except BaseException as e:  # noqa: B036 - kept and re-raised by close()
                logger.error("sdlocal hook: writing the trial failed: %r", e)
                self._error = e
