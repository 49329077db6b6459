"""TraceWriter: smdebug's framework trace files (Chrome trace JSON), as its timeline writer lays them out.

A file is a JSON array, one event per line:

    [
    {"name": "process_name", "ph": "M", "pid": 0, "args": {"start_time_since_epoch_in_micros": T0}},
    {"name": "process_sort_index", "ph": "M", "pid": 0, "args": {"sort_index": 0}},
    {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "Step:ModeKeys.TRAIN"}},
    {"name": "process_sort_index", "ph": "M", "pid": 1, "args": {"sort_index": 1}},
    {"name": "Step:ModeKeys.TRAIN", "pid": 1, "ph": "X", "ts": 1200, "dur": 5400, "args": {"step_num": 0}},
    ...
    ]

`ts` is relative to T0 (the writer's start, the same in every file it writes), `dur` in µs. Each
training phase (the `phase` argument: "Step:ModeKeys.TRAIN", "Forward", "DataLoaderIter", ...)
is a Chrome-trace process: its pid is fixed for the writer's lifetime (from 1; pid 0 carries T0)
and each file declares the phases it uses with `process_name`/`process_sort_index` events.

Rotation (smdebug's policy, ProfilingParameters `RotateMaxFileSizeInBytes` and
`RotateFileCloseIntervalInSeconds`): the open file is closed once it exceeds `max_file_size` bytes
or has been open `close_interval_s` seconds. It is written as `framework/<node>_<suffix>.tmp` and
renamed when closed to `framework/pevents/<YYYYMMDDHH>/<last_event_end_us>_<node>_<suffix>`, so
uploaders (which skip `.tmp`) only see closed files. Nothing is written before the first event.
"""
from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import IO, Any

from sdlocal.trial.profiler.names import (
    FRAMEWORK_END_MARKER,
    FRAMEWORK_PREFIX,
    MODEL_TIMELINE_SUFFIX,
    check_node_id,
    step_phase,
    trace_key,
)

MAX_FILE_SIZE_DEFAULT = 10 * 1024 * 1024  # smdebug's defaults
CLOSE_INTERVAL_DEFAULT_S = 60.0


def now_us() -> int:
    return time.time_ns() // 1000


class TraceWriter:
    """Thread-safe: the hook's threads may record concurrently. `clock_us` gives epoch µs."""

    def __init__(
        self,
        root: str | Path,
        node_id: str,
        *,
        suffix: str = MODEL_TIMELINE_SUFFIX,
        max_file_size: int = MAX_FILE_SIZE_DEFAULT,
        close_interval_s: float = CLOSE_INTERVAL_DEFAULT_S,
        clock_us: Callable[[], int] = now_us,
        start_time_us: int | None = None,
    ) -> None:
        if max_file_size <= 0 or close_interval_s <= 0:
            raise ValueError("max_file_size and close_interval_s must be positive")
        if "/" in suffix or not suffix.endswith(".json"):
            raise ValueError(f"trace file suffix {suffix!r} must be a file name ending in .json")
        self.root = Path(root)
        self.node_id = check_node_id(node_id, for_trace=True)
        self.suffix = suffix
        self.max_file_size = int(max_file_size)
        self.close_interval_us = int(close_interval_s * 1_000_000)
        self.clock_us = clock_us
        self.start_time_us = int(start_time_us if start_time_us is not None else clock_us())
        self.closed_files: list[Path] = []
        self._lock = threading.Lock()
        self._pids: dict[str, int] = {}
        self._prefixes: dict[tuple[str, str], str] = {}
        self._file: IO[str] | None = None
        self._tmp = self.root / FRAMEWORK_PREFIX / f"{self.node_id}_{suffix}.tmp"
        self._declared: set[str] = set()
        self._size = 0
        self._opened_us = 0
        self._last_end_us = 0
        self._last_name_us = 0

    # ---- recording -----------------------------------------------------------------------------
    def record(
        self,
        phase: str,
        name: str,
        start_us: int,
        end_us: int,
        args: Mapping[str, Any] | None = None,
    ) -> None:
        """One complete event ("ph": "X") of `phase` from start_us to end_us (epoch µs)."""
        start_us = int(start_us)
        dur = max(0, int(end_us) - start_us)
        # Encoded by hand (a cached prefix per phase and name, json.dumps only for args): this runs
        # several times per training step.
        tail = f', "ts": {start_us - self.start_time_us}, "dur": {dur}'
        tail += f', "args": {json.dumps(args)}}}' if args else "}"
        with self._lock:
            now = self.clock_us()
            if self._file is not None and self._due(now):
                self._close_file()
            if self._file is None:
                self._open(now)
            self._write(self._prefix(phase, name) + tail)
            self._last_end_us = max(self._last_end_us, start_us + dur)

    def record_many(self, events: Iterable[tuple[str, str, int, int, Mapping[str, Any] | None]]) -> int:
        """Many events at once, written exactly as `record` one by one would write them (rotation
        checked before each), for a hook that queues events and writes them from a background
        thread: one lock and one clock read per batch, and flat args of ints (`step_num`,
        `worker_id`, ...) encoded without json.dumps, which is most of `record`'s cost."""
        n = 0
        with self._lock:
            now = self.clock_us()
            base = self.start_time_us
            for phase, name, start_us, end_us, args in events:
                start_us = int(start_us)
                dur = max(0, int(end_us) - start_us)
                if self._file is not None and self._due(now):
                    self._close_file()
                if self._file is None:
                    self._open(now)
                line = f'{self._prefix(phase, name)}, "ts": {start_us - base}, "dur": {dur}'
                self._write(f'{line}, "args": {_encode_args(args)}}}' if args else line + "}")
                if start_us + dur > self._last_end_us:
                    self._last_end_us = start_us + dur
                n += 1
        return n

    def record_step(self, mode_name: str, step_num: int, start_us: int, end_us: int, **args: Any) -> None:
        """A step event as smdebug names it: phase and name "Step:ModeKeys.<MODE>", args step_num."""
        phase = step_phase(mode_name)
        self.record(phase, phase, start_us, end_us, {"step_num": int(step_num), **args})

    # ---- closing -------------------------------------------------------------------------------
    def close_if_due(self) -> Path | None:
        """Close the open file if the rotation policy says so (call it now and then when events are
        rare, e.g. once per step: `record` only checks when an event comes)."""
        with self._lock:
            if self._file is not None and self._due(self.clock_us()):
                return self._close_file()
        return None

    def flush(self) -> Path | None:
        """Close the open file now (readers see its events once it is uploaded)."""
        with self._lock:
            return self._close_file() if self._file is not None else None

    def close(self) -> Path | None:
        return self.flush()

    def write_end_marker(self) -> Path:
        """`framework/training_job_end.ts` in the local folder."""
        self.close()
        path = self.root / FRAMEWORK_END_MARKER
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
        return path

    # ---- internals (called with the lock held) -------------------------------------------------
    def _due(self, now: int) -> bool:
        return self._size > self.max_file_size or now - self._opened_us >= self.close_interval_us

    def _prefix(self, phase: str, name: str) -> str:
        """`{"name": <name>, "pid": <pid>, "ph": "X"` (smdebug's key order), declaring the phase in
        the open file first if this file has not seen it yet."""
        if phase not in self._declared:
            pid = self._pids.get(phase)
            if pid is None:
                pid = self._pids[phase] = len(self._pids) + 1
            self._declared.add(phase)
            self._write(json.dumps({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": phase}}))
            self._write(json.dumps({"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": pid}}))
        prefix = self._prefixes.get((phase, name))
        if prefix is None:
            prefix = f'{{"name": {json.dumps(name)}, "pid": {self._pids[phase]}, "ph": "X"'
            self._prefixes[(phase, name)] = prefix
        return prefix

    def _write(self, line: str) -> None:
        assert self._file is not None
        text = line if self._size == 2 else ",\n" + line
        self._file.write(text)
        self._size += len(text)  # ASCII: json.dumps escapes everything else

    def _open(self, now: int) -> None:
        self._tmp.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self._tmp, "w", encoding="ascii")
        self._file.write("[\n")
        self._size = 2
        self._opened_us = now
        self._last_end_us = 0
        self._declared = set()
        self._write(json.dumps({"name": "process_name", "ph": "M", "pid": 0,
                                "args": {"start_time_since_epoch_in_micros": self.start_time_us}}))
        self._write(json.dumps({"name": "process_sort_index", "ph": "M", "pid": 0, "args": {"sort_index": 0}}))

    def _close_file(self) -> Path:
        assert self._file is not None
        self._file.write("\n]\n")
        self._file.close()
        self._file = None
        # The name is the end of the file's last event; names must differ and grow, so a file
        # that ends no later than the previous one (events recorded out of order) is named 1 µs
        # after it (a reader only relies on: no event of a file ends after its name).
        name_us = max(self._last_end_us, self._last_name_us + 1)
        self._last_name_us = name_us
        path = self.root / trace_key(name_us, self.node_id, self.suffix)
        path.parent.mkdir(parents=True, exist_ok=True)
        os.replace(self._tmp, path)
        self.closed_files.append(path)
        return path


def _encode_args(args: Mapping[str, Any]) -> str:
    """json.dumps(args) (same text), by hand when every value is an int and every key plain."""
    parts = []
    for k, v in args.items():
        if type(v) is not int or type(k) is not str or not k.isidentifier() or not k.isascii():
            return json.dumps(args)
        parts.append(f'"{k}": {v}')
    return "{" + ", ".join(parts) + "}"
