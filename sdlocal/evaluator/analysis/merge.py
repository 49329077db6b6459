"""smdebug's MergedTimeline: one Chrome trace (chrome://tracing, Perfetto) of a job's framework
events of every node and writer, and its system metrics as counters.

    timeline = MergedTimeline("s3://bucket/out/job/profiler-output", output_directory="./")
    path = timeline.merge_timeline(1, 10, unit=MergeUnit.STEP)   # steps 1..9, or epoch µs with MergeUnit.TIME

The file `<output_directory>/<end µs>_<host>_merged_timeline.json` is a JSON array: per phase a
process (`process_name`, `process_sort_index`: steps first, then forward, backward, data loading,
operators, others), per node and thread a `thread_name`, the complete events ("X"), a counter
("C") per system sample (`<series>_<dimension>_<node>`, in a "System metrics" process), and an
instant event ("i") `sys_metrics_bottlenecks` at each sample where a GPU was below 85 %
utilization, with every figure of that instant as args.

Differences from smdebug: the system counters are written for every job (smdebug wrote them
only while low-GPU samples remained to be matched: none for a job without GPU); the output
directory may be an s3:// prefix (written through trial.storage).
"""
from __future__ import annotations

import json
import socket
from collections.abc import Iterable
from enum import Enum
from pathlib import Path
from typing import Any

from sdlocal.evaluator.analysis.events import smdebug_node_id, stable_thread_id
from sdlocal.evaluator.analysis.readers import framework_records, readers_for, system_columns
from sdlocal.trial.profiler import TraceEvent
from sdlocal.trial.storage import open_storage

MERGED_SUFFIX = "merged_timeline.json"
LOW_GPU_PERCENT = 85.0
# where each kind of phase starts numbering its processes (smdebug's order of the timeline's rows)
PHASE_ORDER = (("Step:", 1), ("Forward", 10000), ("Backward", 20000), ("DataIterator", 30000), ("DataLoader", 30000),
               ("Dataset", 40000), ("/device", 50000), ("/host", 60000), ("gpu_functions", 70000),
               ("cpu_functions", 80000), ("Horovod", 90000))
OTHER_START = 1_000_000
SYSTEM_PID = 2_000_000


class MergeUnit(Enum):
    TIME = "time"
    STEP = "step"


class MergedTimeline:
    def __init__(self, path: str, file_suffix_filter: Iterable[str] | None = None,
                 output_directory: str | None = None, **reader_kwargs: Any) -> None:
        """`path`: the job's profiler-output (s3:// or local); `file_suffix_filter`: merge only the
        trace files whose names end so ("pythontimeline.json", ...); `output_directory`: where the
        merged file goes (default: `path`)."""
        self.path = str(path)
        self.out_dir = str(output_directory) if output_directory is not None else self.path
        self.file_suffix_filter = list(file_suffix_filter) if file_suffix_filter is not None else None
        self.system_metrics_reader, self.framework_metrics_reader = readers_for(self.path, **reader_kwargs)
        self._reader = self.framework_metrics_reader.profiler_reader
        self.bytes_written = 0

    def file_name(self, end_timestamp_in_us: int) -> str:
        name = f"{int(round(end_timestamp_in_us))}_{socket.gethostname().replace('_', '-')}_{MERGED_SUFFIX}"
        return f"{self.out_dir.rstrip('/')}/{name}" if self.out_dir.startswith("s3://") else str(Path(self.out_dir) / name)

    def merge_timeline(self, start: int, end: int, unit: MergeUnit | str = MergeUnit.TIME,
                       sys_metrics_filter: dict[str, Any] | None = None) -> str:
        """Write the events of [start, end] (epoch µs; with MergeUnit.STEP, steps start..end-1)
        and the system samples of that range; returns the file's path. `sys_metrics_filter={}`
        leaves the system metrics out; the default (None, or smdebug's {"lowgpu": ()}) puts them in."""
        if unit in (MergeUnit.STEP, "step"):
            start_us, end_us = self.framework_metrics_reader._get_time_interval_for_step(int(start), int(end))
        else:
            start_us, end_us = int(start), int(end)
        self.framework_metrics_reader.refresh_event_file_list()
        events = framework_records(self._reader, start_us, end_us, self.file_suffix_filter)
        include_system = sys_metrics_filter is None or len(sys_metrics_filter) > 0
        trace = _TraceBuilder()
        for e in events:
            trace.add_event(e)
        if include_system:
            trace.add_system(self._reader, start_us, end_us)
        text = "[\n" + ",\n".join(json.dumps(item) for item in trace.items) + "\n]\n"
        target = self.file_name(end_us)
        self.bytes_written = len(text.encode())
        if target.startswith("s3://"):
            folder, _, name = target.rpartition("/")
            open_storage(folder).write(name, text.encode())
        else:
            Path(target).parent.mkdir(parents=True, exist_ok=True)
            Path(target).write_text(text, encoding="utf-8")
        print(f"Merged timeline saved at: {target}")
        return target


class _TraceBuilder:
    """Chrome-trace items: metadata first seen with each phase and thread, then the events."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self._pids: dict[str, int] = {}
        self._next = {prefix: first for prefix, first in PHASE_ORDER}
        self._next_other = OTHER_START
        self._threads: set[tuple[int, int]] = set()

    def _pid(self, phase: str) -> int:
        pid = self._pids.get(phase)
        if pid is None:
            prefix = next((p for p, _ in PHASE_ORDER if p in phase), None)
            if prefix is None:
                pid, self._next_other = self._next_other, self._next_other + 1
            else:
                pid = self._next[prefix]
                self._next[prefix] += 1
            self._pids[phase] = pid
            self._process(pid, phase)
        return pid

    def _process(self, pid: int, name: str) -> None:
        self.items.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}})
        self.items.append({"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": pid}})

    def add_event(self, e: TraceEvent) -> None:
        pid = self._pid(e.phase)
        node = smdebug_node_id(e.node)
        tid = stable_thread_id(node, e.tid, e.phase) % (1 << 31)  # trace viewers want 32-bit thread ids
        if (pid, tid) not in self._threads:
            self._threads.add((pid, tid))
            self.items.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                               "args": {"name": f"{node}_{e.tid}"}})
        item: dict[str, Any] = {"name": e.name, "pid": pid, "tid": tid, "ph": "X", "ts": e.start_us,
                                "dur": e.end_us - e.start_us}
        if e.args:
            item["args"] = e.args
        self.items.append(item)

    def add_system(self, reader: Any, start_us: int, end_us: int) -> None:
        keys, stamps, values, which = system_columns(reader, start_us, end_us)
        if not len(stamps):
            return
        self._process(SYSTEM_PID, "System metrics")
        self._process(SYSTEM_PID + 1, "sys_metrics_bottlenecks")
        at_instant: dict[int, dict[str, float]] = {}
        low_gpu: set[int] = set()
        for t, v, k in zip(stamps.tolist(), values.tolist(), which.tolist(), strict=True):
            key = keys[k]
            name = f"{key.name}_{key.dimension}_{key.node}"
            self.items.append({"name": name, "ph": "C", "pid": SYSTEM_PID, "ts": t, "args": {"value": v}})
            at_instant.setdefault(t, {})[name] = v
            if key.dimension == "GPUUtilization" and v < LOW_GPU_PERCENT:
                low_gpu.add(t)
        for t in sorted(low_gpu):
            self.items.append({"name": "sys_metrics_bottlenecks", "ph": "i", "s": "g", "pid": SYSTEM_PID + 1,
                               "tid": 0, "ts": t, "args": at_instant[t]})
