"""TensorBoard event files: scalars and histograms that TensorBoard (or its EventAccumulator) reads.

The file format is TFRecord: per record, the payload length (uint64 LE), its masked CRC32C, the
payload (an `Event` protobuf), the payload's masked CRC32C. The first record carries
`file_version: "brain.Event:2"`. The protobuf classes are tensorboard's (already a dependency for
the trial format); the framing is ours (trial.tfrecord's CRC, but the payload's real checksum:
smdebug's trial files carry a constant footer, TensorBoard's readers check it).

Files are `<dir>/events.out.tfevents.<seconds>.<host>.<worker>`, appended to and flushed at each
save step, so the launcher's uploader ships them while training runs.
"""
from __future__ import annotations

import json
import os
import socket
import struct
import time
from pathlib import Path
from typing import Any

import numpy as np
from tensorboard.compat.proto import event_pb2, summary_pb2

from sdlocal.trial.tfrecord import masked_crc32c

HISTOGRAM_BUCKETS = 30
TENSORBOARD_CONFIG_ENV = "TENSORBOARD_CONFIG_FILE_PATH"
DEFAULT_TENSORBOARD_CONFIG = "/opt/ml/input/config/tensorboardoutputconfig.json"


def config_path() -> str:
    """The job's TensorBoardOutputConfig file: `$TENSORBOARD_CONFIG_FILE_PATH`, else SageMaker's path."""
    return os.environ.get(TENSORBOARD_CONFIG_ENV) or DEFAULT_TENSORBOARD_CONFIG


def job_dir(configured: str | None) -> str | None:
    """Where a hook writes TensorBoard files: the LocalPath of the job's TensorBoardOutputConfig
    (`$TENSORBOARD_CONFIG_FILE_PATH`, else SageMaker's path; the launcher uploads that folder to
    the config's S3OutputPath while the job runs), else `configured` (the hook config's
    export_tensorboard / tensorboard_dir), else None."""
    try:
        data = json.loads(open(config_path()).read())
    except (OSError, ValueError):
        return configured
    local = data.get("LocalPath") if isinstance(data, dict) else None
    return local if isinstance(local, str) and local else "/opt/ml/output/tensorboard"


def _record(payload: bytes) -> bytes:
    header = struct.pack("<Q", len(payload))
    return header + struct.pack("<I", masked_crc32c(header)) + payload + struct.pack("<I", masked_crc32c(payload))


def histogram_proto(values: Any, buckets: int = HISTOGRAM_BUCKETS) -> summary_pb2.HistogramProto | None:
    """A HistogramProto of the finite values (None when there are none)."""
    arr = np.asarray(values, dtype=np.float64).ravel()
    arr = arr[np.isfinite(arr)]
    if not arr.size:
        return None
    lo, hi = float(arr.min()), float(arr.max())
    if lo == hi:
        edges = np.array([lo - 0.5, hi + 0.5]) if lo == 0 else np.array([lo - abs(lo) * 0.01, hi + abs(hi) * 0.01])
        counts = np.array([arr.size])
    else:
        counts, edges = np.histogram(arr, bins=buckets)
    proto = summary_pb2.HistogramProto(min=lo, max=hi, num=float(arr.size), sum=float(arr.sum()),
                                       sum_squares=float(np.dot(arr, arr)))
    # TensorBoard's buckets: bucket i covers (limit[i-1], limit[i]]; the left edge is implied.
    proto.bucket_limit.extend(float(e) for e in edges[1:])
    proto.bucket.extend(float(c) for c in counts)
    return proto


class TensorBoardWriter:
    """Appends events to one event file; `flush()` after each step, `close()` at the end."""

    def __init__(self, directory: str | Path, worker: str = "worker_0", *, clock: Any = time.time) -> None:
        self.directory = Path(directory)
        self._clock = clock
        self.directory.mkdir(parents=True, exist_ok=True)
        now = clock()
        self.path = self.directory / f"events.out.tfevents.{int(now):010d}.{socket.gethostname()}.{worker}"
        self._file = open(self.path, "ab")  # noqa: SIM115 - kept open for the training's length
        self._write(event_pb2.Event(wall_time=now, file_version="brain.Event:2"))
        self.flush()

    def _write(self, event: event_pb2.Event) -> None:
        self._file.write(_record(event.SerializeToString()))

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=float(value))])
        self._write(event_pb2.Event(wall_time=self._clock(), step=int(step), summary=summary))

    def add_histogram(self, tag: str, values: Any, step: int) -> None:
        proto = histogram_proto(values)
        if proto is None:
            return
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, histo=proto)])
        self._write(event_pb2.Event(wall_time=self._clock(), step=int(step), summary=summary))

    def flush(self) -> None:
        if not self._file.closed:
            self._file.flush()

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()
