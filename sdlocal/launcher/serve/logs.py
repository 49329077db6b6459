"""The training log into CloudWatch Logs (moto's, behind the same endpoint), where the SDK's
`fit(logs=...)` reads it: group `/aws/sagemaker/TrainingJobs`, stream `<job>/algo-1-<epoch>`,
one event per line, as SageMaker's agent sends a training container's output. A job of several
hosts has one stream per host (`<job>/algo-2-<epoch>`, from its own log: `HostLogPumps`); the SDK's
`logs_for_job` waits for as many streams as the job has instances and shows them all.

Nothing is lost: every line is sent, in order. CloudWatch refuses an empty message (botocore
before sending: the whole call fails), so a blank line is sent as a single space (the SDK's
`logs_for_job` prints it as a blank-looking line). A line longer than one event may be (256 KiB
counting CloudWatch's 26 bytes of overhead) is sent as several events. Calls stay within
PutLogEvents' limits (10,000 events, 1,048,576 bytes counting 26 bytes per event). The file
offset moves on only after a successful call; a failed call is tried again at the next round
(a log group or stream that went away made again) and said once (`on_error`), not at every try.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LOG_GROUP = "/aws/sagemaker/TrainingJobs"
EVENT_OVERHEAD = 26  # bytes CloudWatch adds to each message when it counts a batch's size
MAX_BATCH_EVENTS = 10_000
MAX_BATCH_BYTES = 1_048_576
MAX_EVENT_BYTES = 262_144  # a message's UTF-8 bytes plus EVENT_OVERHEAD
BLANK_LINE = " "  # CloudWatch's messages are at least one character long


def ensure_log_group(logs: Any) -> None:
    try:
        logs.create_log_group(logGroupName=LOG_GROUP)
    except logs.exceptions.ResourceAlreadyExistsException:
        pass


def event_size(message: str) -> int:
    return len(message.encode("utf-8")) + EVENT_OVERHEAD


def line_messages(line: str, max_event_bytes: int = MAX_EVENT_BYTES) -> list[str]:
    """The messages one line of the log is sent as: itself, a space for a blank line, or pieces
    of at most `max_event_bytes` (with the overhead) cut between characters."""
    if not line:
        return [BLANK_LINE]
    data = line.encode("utf-8")
    limit = max_event_bytes - EVENT_OVERHEAD
    if len(data) <= limit:
        return [line]
    pieces = []
    start = 0
    while start < len(data):
        end = min(start + limit, len(data))
        while end < len(data) and data[end] & 0xC0 == 0x80:  # not inside a character
            end -= 1
        pieces.append(data[start:end].decode("utf-8"))
        start = end
    return pieces


@dataclass(frozen=True)
class Line:
    """One line read from the log: its messages, where it starts and ends in the file."""

    start: int
    end: int  # after its newline
    messages: tuple[str, ...]


def read_lines(data: bytes, offset: int, max_event_bytes: int = MAX_EVENT_BYTES) -> list[Line]:
    """The lines of `data` (read at `offset`), split at newlines only; a trailing piece without a
    newline is a line too (the caller passes complete lines but at the end)."""
    lines = []
    pos = 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        stop = len(data) if nl < 0 else nl + 1
        text = data[pos:stop].rstrip(b"\n").removesuffix(b"\r").decode("utf-8", errors="replace")
        lines.append(Line(offset + pos, offset + stop, tuple(line_messages(text, max_event_bytes))))
        pos = stop
    return lines


@dataclass(frozen=True)
class Batch:
    """One PutLogEvents call's messages and where the log stands once it succeeded: `offset` and
    `skip` (messages of the line at `offset` already sent: a line longer than a batch)."""

    messages: tuple[str, ...]
    offset: int
    skip: int


def batches(lines: list[Line], skip: int = 0, *, max_events: int = MAX_BATCH_EVENTS,
            max_bytes: int = MAX_BATCH_BYTES) -> Iterator[Batch]:
    """`lines` in calls within PutLogEvents' limits, in order; the first `skip` messages of the
    first line were sent already."""
    messages: list[str] = []
    size = 0
    offset, done = (lines[0].start, skip) if lines else (0, 0)
    for line in lines:
        for i, message in enumerate(line.messages):
            if line is lines[0] and i < skip:
                continue
            cost = event_size(message)
            if messages and (len(messages) == max_events or size + cost > max_bytes):
                yield Batch(tuple(messages), offset, done)
                messages, size = [], 0
            messages.append(message)
            size += cost
            last = i == len(line.messages) - 1
            offset, done = (line.end, 0) if last else (line.start, i + 1)
    if messages:
        yield Batch(tuple(messages), offset, done)


class LogPump:
    """Sends the lines appended to `path` as log events, every `interval` s until `finish()`.

    The stream is created with the first line (SageMaker's appears when the container first
    writes); a line still being written (no newline yet) waits for the next round. `on_error` is
    told once when sending starts failing (the lines are kept and tried again), and at `finish()`
    what could not be sent before its deadline."""

    def __init__(self, logs: Any, job_name: str, path: Path, *, interval: float = 0.5,
                 clock: Callable[[], float] = time.time, on_error: Callable[[str], None] = lambda message: None,
                 max_event_bytes: int = MAX_EVENT_BYTES, host: str = "algo-1",
                 on_lines: Callable[[list[str], float], None] | None = None) -> None:
        self.logs = logs
        self.path = path
        self.stream = f"{job_name}/{host}-{int(clock())}"
        self.interval = interval
        self.clock = clock
        self.on_error = on_error
        self.max_event_bytes = max_event_bytes
        self.on_lines = on_lines  # each line once it is all sent, with the time it was sent (metrics)
        self._offset = 0
        self._skip = 0  # messages of the line at _offset already sent
        self._last_ms = 0
        self._created = False
        self._failing = False
        self._lock = threading.Lock()  # the thread's rounds and finish()'s last one
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"logs-{job_name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def finish(self, timeout: float = 10.0) -> None:
        """Stop the rounds and send the rest (a last line without a newline too), trying again
        until `timeout`."""
        deadline = time.monotonic() + timeout
        self._done.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        while True:
            try:
                self.send_new(final=True)
                return
            except Exception as e:  # noqa: BLE001 - said below, once
                if time.monotonic() + self.interval >= deadline:
                    self.on_error(f"the training log from byte {self._offset} on was not sent to CloudWatch "
                                  f"Logs: {type(e).__name__}: {e}")
                    return
                self._said(e)
                time.sleep(self.interval)

    def _run(self) -> None:
        while not self._done.wait(self.interval):
            try:
                self.send_new()
            except Exception as e:  # noqa: BLE001 - a failed round is tried again; the log file stays
                self._said(e)

    def _said(self, error: Exception) -> None:
        if not self._failing:
            self._failing = True
            self.on_error(f"sending the training log to CloudWatch Logs failed, trying again: "
                          f"{type(error).__name__}: {error}")

    def send_new(self, final: bool = False) -> int:
        """Send what was appended since the last successful call; the number of events sent.
        Raises the failed call's error, the lines not sent kept for the next call."""
        with self._lock:
            return self._send(final)

    def _send(self, final: bool) -> int:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self._offset)
                data = fh.read()
        except FileNotFoundError:
            return 0
        end = len(data) if final else data.rfind(b"\n") + 1
        if end <= 0:
            return 0
        lines = read_lines(data[:end], self._offset, self.max_event_bytes)
        if not self._created:
            ensure_log_group(self.logs)
            try:
                self.logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=self.stream)
            except self.logs.exceptions.ResourceAlreadyExistsException:
                pass  # created by a call whose answer was lost
            self._created = True
        sent = told = 0
        for batch in batches(lines, self._skip):
            now = max(int(self.clock() * 1000), self._last_ms)  # never earlier than what was sent
            try:
                self.logs.put_log_events(logGroupName=LOG_GROUP, logStreamName=self.stream,
                                         logEvents=[{"timestamp": now, "message": m} for m in batch.messages])
            except self.logs.exceptions.ResourceNotFoundException:
                self._created = False  # the group or stream went away: made again at the next try
                raise
            self._last_ms = now
            self._offset, self._skip = batch.offset, batch.skip
            sent += len(batch.messages)
            done = [line for line in lines[told:] if line.end <= self._offset]
            told += len(done)
            if done and self.on_lines is not None:
                self.on_lines(["".join(line.messages) for line in done], now / 1000)
        self._failing = False
        return sent


class HostLogPumps:
    """One `LogPump` per host of a job (`paths`: host -> its training log, the first host's first),
    started and finished together."""

    def __init__(self, logs: Any, job_name: str, paths: dict[str, Path], *,
                 on_lines: Callable[[list[str], float], None] | None = None, **kwargs: Any) -> None:
        # the metrics (`on_lines`) are the first host's log's, as SageMaker's come from algo-1's
        first = next(iter(paths))
        self.pumps = [LogPump(logs, job_name, path, host=host, on_lines=on_lines if host == first else None, **kwargs)
                      for host, path in paths.items()]

    def start(self) -> None:
        for pump in self.pumps:
            pump.start()

    def finish(self, timeout: float = 10.0) -> None:
        for pump in self.pumps:
            pump.finish(timeout)
