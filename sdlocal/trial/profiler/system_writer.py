"""SystemMetricsWriter: SageMaker's system-monitor files, one sample per JSON line.

A line is `{"Type":"cpu","Name":"cpu0","Dimension":"CPUUtilization","Value":4.76,"NodeId":"algo-1",
"Timestamp":1591748169.2323716}`: keys in that order, no spaces, the value rounded to 2 decimals
(written as an integer when whole), the timestamp in float seconds, as in SageMaker's own files.

Rotation: a file covers one period of `close_interval_s` aligned on the epoch (60 s: one file per
UTC minute, as SageMaker writes them) and is named after the period's start,
`system/incremental/<YYYYMMDDHH>/<start:10d>.<node>.json`. Lines go to `<name>.tmp`, which is
renamed to its final name when the period is over, so an uploader that skips `.tmp` files only
ever sees closed files.
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import IO, NamedTuple

from sdlocal.trial.profiler.names import DEFAULT_NODE, SYSTEM_END_MARKER, check_node_id, system_key


class Sample(NamedTuple):
    """One figure of one sampling instant (the writer adds NodeId and Timestamp)."""

    type: str
    name: str
    dimension: str
    value: float


def format_value(value: float) -> str:
    if not math.isfinite(value):
        raise ValueError(f"metric value {value!r} is not a finite number")
    rounded = round(float(value), 2)
    return str(int(rounded)) if rounded.is_integer() else repr(rounded)


class SystemMetricsWriter:
    """Writes the system metrics of one node under `root` (the job's local profiler-output folder).

    Not thread-safe: one sampler thread writes. `close()` closes the open file (renamed even if its
    period is not over: the job ended) and may be called twice."""

    def __init__(self, root: str | Path, node_id: str = DEFAULT_NODE, *, close_interval_s: int = 60) -> None:
        if int(close_interval_s) != close_interval_s or close_interval_s < 1:
            # Whole seconds: each period's start must give a distinct 10-digit file name.
            raise ValueError(f"close_interval_s must be a whole number of seconds >= 1, not {close_interval_s!r}")
        self.root = Path(root)
        self.node_id = check_node_id(node_id, for_trace=False)
        self.close_interval_s = int(close_interval_s)
        self.closed_files: list[Path] = []
        self._file: IO[str] | None = None
        self._path: Path | None = None
        self._period_start = 0
        self._prefixes: dict[tuple[str, str, str], str] = {}
        self._suffix = ',"NodeId":' + json.dumps(self.node_id) + ',"Timestamp":'

    def _prefix(self, sample: Sample) -> str:
        key = (sample.type, sample.name, sample.dimension)
        prefix = self._prefixes.get(key)
        if prefix is None:
            prefix = (f'{{"Type":{json.dumps(sample.type)},"Name":{json.dumps(sample.name)},'
                      f'"Dimension":{json.dumps(sample.dimension)},"Value":')
            self._prefixes[key] = prefix
        return prefix

    def write(self, samples: Iterable[Sample], timestamp: float) -> int:
        """Append the samples of one instant (epoch seconds); returns the number of lines written."""
        if not math.isfinite(timestamp) or timestamp <= 0:
            raise ValueError(f"timestamp {timestamp!r} is not epoch seconds")
        lines = []
        stamp = repr(float(timestamp)) + "}\n"
        for s in samples:
            lines.append(self._prefix(s) + format_value(s.value) + self._suffix + stamp)
        if not lines:
            return 0
        period = int(timestamp // self.close_interval_s) * self.close_interval_s
        if self._file is not None and period > self._period_start:
            self._close_file()
        if self._file is None:
            self._open(max(period, self._period_start))
        assert self._file is not None
        self._file.writelines(lines)
        return len(lines)

    def close_if_due(self, now: float) -> Path | None:
        """Close the open file when `now` (epoch seconds) is past its period; returns its path."""
        if self._file is not None and now >= self._period_start + self.close_interval_s:
            return self._close_file()
        return None

    @property
    def open_until(self) -> float | None:
        """When the open file's period ends (epoch seconds: `close_if_due` closes it from then
        on); None when no file is open. A sampler slower than the period wakes up for it."""
        return None if self._file is None else float(self._period_start + self.close_interval_s)

    def close(self) -> Path | None:
        return self._close_file() if self._file is not None else None

    def write_end_marker(self) -> Path:
        """`system/training_job_end.ts` in the local folder (for local jobs; the platform writes the
        S3 one after its final upload)."""
        self.close()
        path = self.root / SYSTEM_END_MARKER
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
        return path

    # ---- files -------------------------------------------------------------------------------
    def _open(self, period_start: int) -> None:
        # A clock that steps back keeps writing to the current period: never reopen a closed name.
        path = self.root / system_key(period_start, self.node_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._path = path
        self._period_start = period_start
        self._file = open(path.with_name(path.name + ".tmp"), "w", encoding="ascii")

    def _close_file(self) -> Path:
        assert self._file is not None and self._path is not None
        tmp = self._file.name
        self._file.close()
        self._file = None
        os.replace(tmp, self._path)
        self.closed_files.append(self._path)
        # The next period starts strictly later, so no file name is ever written twice.
        self._period_start += self.close_interval_s
        return self._path
