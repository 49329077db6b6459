"""ProfilerTrial: what a profiler rule reads (its `base_trial`), a job's profiler-output seen
through `sdlocal.trial.profiler.ProfilerReader`, and the data horizon the evaluator loop cuts windows at.

Streams: "system" (the sampler's system metrics) and "framework" (the hook's trace events). A
rule declares the streams it reads (`ProfilerRule.streams`); its windows start at the first
timestamp of those streams and end, live, at their horizon:

- system: every node's newest sample is read, and its files arrive in time order, so every sample
  before the oldest of those newest samples is in (min over nodes of the newest sample, + 1 µs);
- framework: the same with each trace writer's latest event end (writers emit an event when it
  ends, so events are assigned to the window that holds their end).

A rule reading both streams is judged as far as the streams that already have data reach (a job
without framework metrics must not hold a system rule back forever). Once training has ended and
every file is read (`loaded_all`), the horizon is the end of all data.

Times are epoch microseconds, windows half-open `[start_us, end_us)`.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from sdlocal.trial.profiler import (
    FrameworkEvents,
    ProfilerReader,
    RefreshResult,
    SystemMetrics,
    SystemRecord,
    TraceEvent,
)
from sdlocal.trial.storage import Storage

SYSTEM = "system"
FRAMEWORK = "framework"
STREAMS = frozenset({SYSTEM, FRAMEWORK})


class ProfilerTrial:
    def __init__(self, reader: ProfilerReader, *, name: str = "", ended: Callable[[], bool] | None = None) -> None:
        """`ended`: another sign that training has ended (the debug-output's end marker)."""
        self.reader = reader
        self.name = name or reader.storage.uri
        self._other_end = ended
        self._ends = np.empty(0, np.int64)  # framework event ends, sorted (cached)
        self._ends_for = 0

    @classmethod
    def open(cls, location: str | Path | Storage, *, s3_client: Any = None, endpoint_url: str | None = None,
             ended: Callable[[], bool] | None = None) -> ProfilerTrial:
        return cls(ProfilerReader(location, s3_client=s3_client, endpoint_url=endpoint_url), ended=ended)

    def __repr__(self) -> str:
        return f"<ProfilerTrial {self.name}>"

    @property
    def path(self) -> str:
        """The profiler-output location (smdebug's `ProfilerTrial.path`)."""
        return self.reader.storage.uri

    @property
    def system(self) -> SystemMetrics:
        return self.reader.system

    @property
    def framework(self) -> FrameworkEvents:
        return self.reader.framework

    @property
    def loaded_all(self) -> bool:
        """Training has ended and every file was read."""
        return self.reader.loaded_all

    def refresh(self) -> RefreshResult:
        return self.reader.refresh()

    def training_ended(self) -> bool:
        """An end marker is there (profiler-output's `system/` or `framework/training_job_end.ts`,
        or the one `ended` looks for); the reader then makes its final pass at the next refresh."""
        if self.reader.training_ended():
            return True
        if self._other_end is not None and self._other_end():
            self.reader.assume_ended()
            return True
        return False

    def assume_ended(self) -> None:
        self.reader.assume_ended()

    # ---- time ---------------------------------------------------------------------------------
    def first_timestamp_us(self, streams: Iterable[str] = STREAMS) -> int | None:
        """The first sample / event start of the given streams (None: no data yet)."""
        firsts = [r[0] for r in self._ranges(streams) if r is not None]
        return min(firsts) if firsts else None

    def last_timestamp_us(self, streams: Iterable[str] = STREAMS) -> int | None:
        """The last sample / event end of the given streams (None: no data yet)."""
        lasts = [r[1] for r in self._ranges(streams) if r is not None]
        return max(lasts) if lasts else None

    @property
    def first_timestamp(self) -> int:
        """smdebug's: the first timestamp of the profiler data in µs, 0 while there is none."""
        return self.first_timestamp_us() or 0

    def horizon_us(self, streams: Iterable[str] = STREAMS) -> int | None:
        """The exclusive end of the time up to which the streams' data is complete (module
        docstring); None while none of them has data."""
        streams = frozenset(streams)
        if self.reader.loaded_all:
            last = self.last_timestamp_us(streams)
            return None if last is None else last + 1
        ends: list[int] = []
        if SYSTEM in streams:
            latest = self.system.latest_by_node()
            if latest:
                ends.append(min(latest.values()) + 1)
        if FRAMEWORK in streams:
            latest = self.framework.latest_end_by_node()
            if latest:
                ends.append(min(latest.values()) + 1)
        return min(ends) if ends else None

    def next_timestamp_us(self, streams: Iterable[str], at_or_after_us: int) -> int | None:
        """The first datapoint at or after a time: a system sample, or a framework event's end
        (events belong to the window holding their end); None when there is none read."""
        streams = frozenset(streams)
        found: list[int] = []
        if SYSTEM in streams:
            for key in self.system.keys():
                stamps = self.system.series(key, at_or_after_us, None).timestamps_us
                if stamps.size:
                    found.append(int(stamps[0]))
        if FRAMEWORK in streams and len(self.framework):
            if self._ends_for != len(self.framework):
                self._ends = np.sort(self.framework.arrays().end_us)
                self._ends_for = len(self.framework)
            i = int(np.searchsorted(self._ends, at_or_after_us, side="left"))
            if i < self._ends.size:
                found.append(int(self._ends[i]))
        return min(found) if found else None

    def _ranges(self, streams: Iterable[str]) -> list[tuple[int, int] | None]:
        streams = frozenset(streams)
        out: list[tuple[int, int] | None] = []
        if SYSTEM in streams:
            out.append(self.system.time_range())
        if FRAMEWORK in streams:
            out.append(self.framework.time_range())
        return out

    # ---- smdebug's ProfilerTrial accessors (for custom rules written in its style) --------------
    def get_system_metrics(self, start_us: int | None = None, end_us: int | None = None) -> list[SystemRecord]:
        """Every system sample with start_us <= timestamp < end_us, by time."""
        out: list[SystemRecord] = []
        for key, series in self.system.select(start_us=start_us, end_us=end_us).items():
            out += [SystemRecord(key.node, key.type, key.name, key.dimension, int(t), float(v))
                    for t, v in zip(series.timestamps_us.tolist(), series.values.tolist(), strict=True)]
        out.sort(key=lambda r: r.timestamp_us)
        return out

    def get_framework_metrics(self, start_us: int | None = None, end_us: int | None = None) -> list[TraceEvent]:
        """Every framework event overlapping [start_us, end_us), by start time."""
        return self.framework.events(start_us, end_us)
