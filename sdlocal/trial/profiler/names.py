"""Names and keys of a job's `profiler-output/` (trial-format.md §9), as SageMaker and smdebug lay
them out. Keys are relative to the profiler-output root and always use "/".

    system/incremental/<YYYYMMDDHH>/<epoch_seconds:10d>.<node>.json        JSON Lines
    system/training_job_end.ts
    framework/pevents/<YYYYMMDDHH>/<last_event_end_us>_<node>_<suffix>     Chrome trace JSON
    framework/training_job_end.ts

The hour folder is UTC. Times are integer microseconds since the epoch everywhere in this package
(smdebug's unit); system-metric lines carry float seconds, as SageMaker writes them.
"""
from __future__ import annotations

import re
import time
from typing import NamedTuple

from sdlocal.trial.writer import END_MARKER

SYSTEM_PREFIX = "system/"
SYSTEM_INCREMENTAL = "system/incremental"
FRAMEWORK_PREFIX = "framework/"
FRAMEWORK_PEVENTS = "framework/pevents"
SYSTEM_END_MARKER = f"system/{END_MARKER}"
FRAMEWORK_END_MARKER = f"framework/{END_MARKER}"

# smdebug's trace-file suffixes (profiler_constants.py). Its PyTorch hook writes pythontimeline;
# TensorFlow's model timeline and SageMaker's docs use model_timeline. The reader takes both.
MODEL_TIMELINE_SUFFIX = "model_timeline.json"
PYTHON_TIMELINE_SUFFIX = "pythontimeline.json"

DEFAULT_NODE = "algo-1"

# System metric names (Type, Name, Dimension) as SageMaker's system monitor writes them.
CPU_TYPE = "cpu"
GPU_TYPE = "gpu"
MEMORY_TYPE = "memory"
IO_TYPE = "i/o"
NETWORK_TYPE = "network"
CPU_UTILIZATION = "CPUUtilization"
IO_WAIT = "I/OWaitPercentage"
GPU_UTILIZATION = "GPUUtilization"
GPU_MEMORY_UTILIZATION = "GPUMemoryUtilization"
MEMORY_USED_PERCENT = "MemoryUsedPercent"
RECEIVE_BPS = "ReceiveBytesPerSecond"
TRANSMIT_BPS = "TransmitBytesPerSecond"
NETWORK_DIMENSION = "Algorithm"
READ_BPS = "ReadThroughputInBytesPerSecond"
WRITE_BPS = "WriteThroughputInBytesPerSecond"
IOPS = "IOPS"

# Framework event names smdebug's PyTorch hook and SageMaker's PyTorch data loader use.
FORWARD_PHASE = "Forward"
BACKWARD_PHASE = "Backward(post-forward)"
DATALOADER_ITER = "DataLoaderIter"
DATALOADER_WORKER = "DataLoaderWorker"
DATALOADER_INITIALIZE = "DataLoaderIterInitialize"
STEP_PHASE_PREFIX = "Step:"


def step_phase(mode_name: str) -> str:
    """"Step:ModeKeys.TRAIN" for "TRAIN" (smdebug's `"Step:" + str(mode)`)."""
    return f"{STEP_PHASE_PREFIX}ModeKeys.{mode_name}"


def hour_folder(epoch_s: float) -> str:
    return time.strftime("%Y%m%d%H", time.gmtime(epoch_s))


_NODE_RE = re.compile(r"^[A-Za-z0-9.-]+$")


def check_node_id(node_id: str, *, for_trace: bool) -> str:
    """Node ids end up inside file names that readers split on "_" (trace) or "." (system)."""
    bad = "_" if for_trace else "."
    if not node_id or not _NODE_RE.match(node_id) or bad in node_id:
        raise ValueError(f"node id {node_id!r}: letters, digits, '-' only (it is part of a file name)")
    return node_id


def system_key(start_s: int, node_id: str = DEFAULT_NODE) -> str:
    return f"{SYSTEM_INCREMENTAL}/{hour_folder(start_s)}/{int(start_s):010d}.{node_id}.json"


def trace_key(last_event_end_us: int, node_id: str, suffix: str = MODEL_TIMELINE_SUFFIX) -> str:
    return f"{FRAMEWORK_PEVENTS}/{hour_folder(last_event_end_us / 1e6)}/{int(last_event_end_us)}_{node_id}_{suffix}"


class SystemFileName(NamedTuple):
    start_us: int
    node_id: str


class TraceFileName(NamedTuple):
    end_us: int
    node_id: str
    suffix: str


# smdebug: ".+/system/.+/(\d{10}).algo-\d+.json"; any folder depth under system/ is accepted.
_SYSTEM_FILE_RE = re.compile(r"^system/(?:.+/)?(\d{10})\.([A-Za-z0-9-]+)\.json$")
# smdebug splits the file name on "_": [0] = timestamp, [1] = node id, the rest names the kind.
_TRACE_FILE_RE = re.compile(r"^framework/pevents/(?:.+/)?(\d+)_([^_/]+)_([^/]+\.json)$")


def parse_system_key(key: str) -> SystemFileName | None:
    m = _SYSTEM_FILE_RE.match(key)
    return SystemFileName(int(m.group(1)) * 1_000_000, m.group(2)) if m else None


def parse_trace_key(key: str) -> TraceFileName | None:
    m = _TRACE_FILE_RE.match(key)
    return TraceFileName(int(m.group(1)), m.group(2), m.group(3)) if m else None
