"""The training log into CloudWatch Logs (moto's, behind the same endpoint), where the SDK's
`fit(logs=...)` reads it: group `/aws/sagemaker/TrainingJobs`, stream `<job>/algo-1-<epoch>`,
one event per line, as SageMaker's agent sends a training container's output."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

LOG_GROUP = "/aws/sagemaker/TrainingJobs"
_MAX_BATCH = 1000  # PutLogEvents' limit of events per call


def ensure_log_group(logs: Any) -> None:
    try:
        logs.create_log_group(logGroupName=LOG_GROUP)
    except logs.exceptions.ResourceAlreadyExistsException:
        pass


class LogPump:
    """Sends the lines appended to `path` as log events, every `interval` s until `finish()`.

    The stream is created with the first line (SageMaker's appears when the container first
    writes); a line still being written (no newline yet) waits for the next round."""

    def __init__(self, logs: Any, job_name: str, path: Path, *, interval: float = 0.5,
                 clock: Callable[[], float] = time.time, on_error: Callable[[Exception], None] = lambda e: None) -> None:
        self.logs = logs
        self.path = path
        self.stream = f"{job_name}/algo-1-{int(clock())}"
        self.interval = interval
        self.clock = clock
        self.on_error = on_error
        self._offset = 0
        self._created = False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"logs-{job_name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def finish(self, timeout: float = 10.0) -> None:
        self._done.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        self.send_new(final=True)

    def _run(self) -> None:
        while not self._done.wait(self.interval):
            try:
                self.send_new()
            except Exception as e:  # noqa: BLE001 - a failed round is tried again; the log file stays
                self.on_error(e)

    def send_new(self, final: bool = False) -> int:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self._offset)
                data = fh.read()
        except FileNotFoundError:
            return 0
        end = len(data) if final else data.rfind(b"\n") + 1
        if end <= 0:
            return 0
        lines = data[:end].decode("utf-8", errors="replace").splitlines()
        self._offset += end
        if not lines:
            return 0
        if not self._created:
            ensure_log_group(self.logs)
            self.logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=self.stream)
            self._created = True
        now = int(self.clock() * 1000)
        events = [{"timestamp": now, "message": line} for line in lines]
        for i in range(0, len(events), _MAX_BATCH):
            self.logs.put_log_events(logGroupName=LOG_GROUP, logStreamName=self.stream,
                                     logEvents=events[i:i + _MAX_BATCH])
        return len(events)
