"""smdebug's event objects and time helpers, over the records of sdlocal's profiler reader
(trial.profiler): what `get_events()` of smdebug's metrics readers returns and what its pandas
frames are made of. One reading of the files (trial/profiler/parse.py); this module only
presents its records the way smdebug's parsers did.

- `SystemEvent`: smdebug's ProfilerSystemEvent (`type`, `name`, `dimension`, `value`, `node_id`,
  `timestamp` in float seconds since the epoch).
- `FrameworkEvent`: smdebug's TraceEvent (`start_time`, `end_time`, `duration` in µs since the
  epoch; `event_name`, `event_phase` (the Chrome-trace process name: "Step:ModeKeys.TRAIN",
  "Forward", ...), `event_args`, `node_id`, `pid`, `tid`, `phase_pid`, `phase_tid`, `phase` "X",
  `file_type`, `process_info`, `to_json()`).

As smdebug's parser: a trace file's node id "<pid>-algo-<n>" reads "algo-<n>-<pid>" (sorted by
host in a timeline); `pid` and `tid` are those of the args when the args carry them
("pid", "thread_id"); a thread of a phase that names no thread gets an id made of its node,
thread and phase. smdebug made that id with Python's `hash()`, different in every process; here
it is a stable 63-bit hash of the same text (same grouping, same value in every process).
"""
from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime, timedelta, timezone
from enum import Enum
from typing import Any

from sdlocal.trial.profiler import SeriesKey, TraceEvent

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
HUMAN_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S:%f"  # smdebug's us_since_epoch_to_human_readable_time
_NODE_PID = re.compile(r"(.*)-(algo.*)")

# smdebug's parser kinds, by the trace file's suffix (smdebug.profiler.profiler_constants)
FILE_TYPES = (
    ("pythontimeline.json", "PythontimelineMetrics"),
    ("model_timeline.json", "DetailedframeworkMetrics"),
    ("horovod_timeline.json", "HorovodMetrics"),
    ("smdataparallel_timeline.json", "SMDataParallelMetrics"),
)


class TimeUnits(Enum):
    """smdebug.profiler.utils.TimeUnits: the unit of the times given to `get_events`."""

    SECONDS = 1
    MILLISECONDS = 2
    MICROSECONDS = 3
    NANOSECONDS = 4


def to_microseconds(timestamp: float, unit: TimeUnits = TimeUnits.MICROSECONDS) -> int:
    """smdebug's convert_utc_timestamp_to_microseconds (truncating, as smdebug's int())."""
    if unit == TimeUnits.SECONDS:
        return int(timestamp * 1_000_000)
    if unit == TimeUnits.MILLISECONDS:
        return int(timestamp * 1000)
    if unit == TimeUnits.NANOSECONDS:
        return int(timestamp // 1000)
    return int(timestamp)


def human_time(us_since_epoch: int) -> str:
    """"2020-08-06T07:12:35:624000" (UTC), exactly, from integer microseconds."""
    return (EPOCH + timedelta(microseconds=int(us_since_epoch))).strftime(HUMAN_TIME_FORMAT)


def parse_human_time(value: Any) -> int:
    """Microseconds since the epoch of a time as the frames print it (or a datetime / pandas
    Timestamp); naive times are UTC. smdebug's PandasFrame.convert_datetime_to_timestamp."""
    if isinstance(value, str):
        dt = datetime.strptime(value, HUMAN_TIME_FORMAT)
    elif isinstance(value, datetime):
        dt = value
    elif hasattr(value, "to_pydatetime"):
        dt = value.to_pydatetime()
    else:
        raise TypeError(f"a time as the frames print it ({HUMAN_TIME_FORMAT!r}) or a datetime, not {value!r}")
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return (dt - EPOCH) // timedelta(microseconds=1)


def smdebug_node_id(node: str) -> str:
    """smdebug's node id of a trace event: "<pid>-algo-<n>" becomes "algo-<n>-<pid>"."""
    m = _NODE_PID.match(node)
    return f"{m.group(2)}-{m.group(1)}" if m else node


def file_type(source: str) -> str:
    return next((kind for suffix, kind in FILE_TYPES if source.endswith(suffix)), "")


def stable_thread_id(node_id: str, tid: Any, phase: str) -> int:
    """The id smdebug gave a phase's thread (`hash(node + "_" + tid + phase)`), stable across runs."""
    digest = hashlib.blake2b(f"{node_id}_{tid}{phase}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


class SystemEvent:
    """smdebug's ProfilerSystemEvent."""

    __slots__ = ("type", "name", "dimension", "value", "node_id", "timestamp")

    def __init__(self, event_type: str, name: str, dimension: str, value: float, node_id: str,
                 timestamp: float) -> None:
        self.type = event_type
        self.name = name
        self.dimension = dimension
        self.value = value
        self.node_id = node_id
        self.timestamp = timestamp  # seconds since the epoch

    @classmethod
    def of(cls, key: SeriesKey, timestamp_us: int, value: float) -> SystemEvent:
        return cls(key.type, key.name, key.dimension, float(value), key.node, timestamp_us / 1e6)

    def __repr__(self) -> str:
        return (f"SystemEvent({self.type}/{self.name}/{self.dimension}={self.value} {self.node_id} "
                f"@{self.timestamp})")


class ThreadInfo:
    def __init__(self, tid: int, thread_name: str) -> None:
        self.tid = tid
        self.thread_name = thread_name

    def __repr__(self) -> str:
        return f"tid:{self.tid} name:{self.thread_name}"


class ProcessInfo:
    """A phase (Chrome-trace process) and the threads seen in it."""

    def __init__(self, id: int, name: str) -> None:
        self.id = id
        self.name = name
        self._threads: dict[int, ThreadInfo] = {}

    def add_thread(self, tid: int, thread_name: str) -> None:
        if tid not in self._threads:
            self._threads[tid] = ThreadInfo(tid, thread_name)

    def get_thread_info(self, tid: int) -> ThreadInfo:
        return self._threads[tid]

    def __repr__(self) -> str:
        return f"id:{self.id} name:{self.name} threads:{self._threads}"


class FrameworkEvent:
    """smdebug's TraceEvent (a complete "X" event of a framework trace file)."""

    def __init__(self, ts: int, name: str, dur: int, phase_pid: int, phase_tid: int, event_args: dict | None,
                 node_id: str, phase: str, file_type: str, event_phase: str = "", pid: int = 0, tid: int = 0,
                 process_info: ProcessInfo | None = None) -> None:
        self.start_time = ts
        self.event_name = name
        self.duration = dur
        self.end_time = ts + dur
        self.phase_pid = phase_pid
        self.phase_tid = phase_tid
        self.pid = pid
        self.tid = tid
        self.event_args = event_args
        self.node_id = node_id
        self.phase = phase
        self.event_phase = event_phase
        self.process_info = process_info
        self.file_type = file_type

    def to_json(self) -> str:
        """The event as one Chrome-trace JSON object (smdebug's to_json)."""
        out: dict[str, Any] = {"name": self.event_name, "pid": self.pid, "tid": self.tid, "ph": self.phase,
                               "ts": self.start_time}
        args = dict(self.event_args) if self.event_args else None
        if self.phase == "i":
            out["s"] = (args or {}).pop("s", "t")
        elif self.phase == "X":
            out["dur"] = self.duration
        if args:
            out["args"] = args
        return json.dumps(out)

    def __repr__(self) -> str:
        return (f"FrameworkEvent({self.event_phase}/{self.event_name} {self.start_time}..{self.end_time} "
                f"{self.node_id})")


class FrameworkEventFactory:
    """Builds smdebug's view of sdlocal's trace records; keeps one ProcessInfo per phase."""

    def __init__(self) -> None:
        self._processes: dict[str, ProcessInfo] = {}

    def __call__(self, e: TraceEvent) -> FrameworkEvent:
        node = smdebug_node_id(e.node)
        args = e.args
        phase_tid = stable_thread_id(node, e.tid, e.phase)
        process = self._processes.get(e.phase)
        if process is None:
            process = self._processes[e.phase] = ProcessInfo(e.pid, e.phase)
        process.add_thread(phase_tid, f"{node}_{e.tid}")
        pid, tid = e.pid, phase_tid
        if args:
            pid = args.get("pid", pid)
            tid = args.get("thread_id", tid)
        return FrameworkEvent(e.start_us, e.name, e.end_us - e.start_us, e.pid, phase_tid, args, node, "X",
                              file_type(e.source), e.phase, pid, tid, process)


def frame_fields(e: TraceEvent) -> tuple[int, Any, Any, str, int]:
    """(phase_tid-or-args-thread_id, pid, name, node_id, step) as smdebug's frames show them:
    the frame's `tid` and `pid` columns, `framework_metric` (args layer_name, else args name,
    else the event's name), `nodeID`, and `step` (args step_num, else -1)."""
    node = smdebug_node_id(e.node)
    args = e.args or {}
    tid = args.get("thread_id", stable_thread_id(node, e.tid, e.phase))
    pid = args.get("pid", e.pid)
    name = args.get("layer_name", args.get("name", e.name))
    try:
        step = int(args.get("step_num", -1))
    except (TypeError, ValueError):
        step = -1
    return tid, pid, name, node, step
