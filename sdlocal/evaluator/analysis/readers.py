"""smdebug's system and algorithm (framework) metrics readers, over sdlocal's profiler reader.

    reader = LocalSystemMetricsReader("<job>/output/profiler")      # or S3SystemMetricsReader("s3://...")
    reader.refresh_event_file_list()
    last = reader.get_timestamp_of_latest_available_file()          # µs since the epoch, 0: none yet
    events = reader.get_events(0, last)                             # [SystemEvent]
    fw = S3AlgorithmMetricsReader("s3://bucket/out/job/profiler-output")
    fw.get_events(start_us, end_us)                                 # [FrameworkEvent], overlapping the range

One implementation: the files are listed and read by `sdlocal.trial.profiler.ProfilerReader` (one per
reader, following its own prefix, or one shared by a PandasFrame's two readers); this module only
answers smdebug's questions about what it read. S3 goes through trial.storage: the client given,
or one made with boto3's own resolution (the user's AWS settings, AWS_ENDPOINT_URL_S3 /
AWS_ENDPOINT_URL: the embedded S3, LocalStack, `sdlocal serve`).

Semantics kept from smdebug: times in µs unless `unit=` says otherwise; a system sample is
returned when start <= its time <= end, a framework event when it overlaps [start, end] (both
ends included); `get_events` lists new files first when `end` reaches the latest file;
"latest/first available file" are file-name timestamps (a system file's period start, a trace
file's last event end). Differences: events come sorted by time (smdebug: by file, then line);
an event is found whatever file holds it (smdebug looked only at files within 3 minutes of the
range); `B`/`E` event pairs (Horovod timelines) and TensorFlow's detailed profiles (trace.json.gz)
are not read.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from sdlocal.evaluator.analysis.events import (
    FrameworkEvent,
    FrameworkEventFactory,
    SystemEvent,
    TimeUnits,
    to_microseconds,
)
from sdlocal.trial.profiler import ProfilerReader, SeriesKey, TraceEvent
from sdlocal.trial.profiler.names import PYTHON_TIMELINE_SUFFIX

log = logging.getLogger(__name__)

SYSTEM = "system"
FRAMEWORK = "framework"


class MetricsReaderBase:
    """What both readers share: the file list (as timestamps) and refreshing it."""

    stream = ""
    prefix = ""

    def __init__(self, location: str | Path, use_in_memory_cache: bool = False, *, reader: ProfilerReader | None = None,
                 s3_client: Any = None, endpoint_url: str | None = None) -> None:
        self.path = str(location)
        self._reader = reader or ProfilerReader(location, s3_client=s3_client, endpoint_url=endpoint_url,
                                                streams=(self.stream,))
        self._cache_events_in_memory = use_in_memory_cache  # accepted: events are always kept in memory
        self.logger = log
        self.refresh_event_file_list()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._reader.storage.uri}>"

    @property
    def profiler_reader(self) -> ProfilerReader:
        """sdlocal's reader underneath (its `system` and `framework` data, by time window)."""
        return self._reader

    def refresh_event_file_list(self) -> None:
        """List the files that appeared since the last call (and read them)."""
        self._reader.refresh()

    def parse_event_files(self, event_files: Iterable[str]) -> None:
        """Kept for code that calls it: files are read when listed."""

    def get_timestamp_of_first_available_file(self) -> int:
        span = self._reader.file_span(self.stream)
        return span[0] if span else 0

    def get_timestamp_of_latest_available_file(self) -> int:
        span = self._reader.file_span(self.stream)
        return span[1] if span else 0

    def get_current_time_range_for_event_query(self) -> tuple[int, int]:
        span = self._reader.file_span(self.stream)
        return span if span else (0, 0)

    def _range(self, start_time: float, end_time: float, unit: TimeUnits) -> tuple[int, int]:
        start, end = to_microseconds(start_time, unit), to_microseconds(end_time, unit)
        if end >= self.get_timestamp_of_latest_available_file():
            self.refresh_event_file_list()  # smdebug: a range reaching the newest file lists again
        return start, end

    def _get_time_interval_for_step(self, start_step: int, end_step: int) -> tuple[int, int]:
        """From the start of the first event of `start_step` to just before the first event of
        `end_step` (args step_num of the pythontimeline events, any mode); (0, 0) when either is
        missing. smdebug's helper of get_events_by_step and MergedTimeline."""
        self.refresh_event_file_list()
        start_us = end_us = None
        for e in self._reader.framework.events():
            if not e.source.endswith(PYTHON_TIMELINE_SUFFIX) or not e.args or "step_num" not in e.args:
                continue
            step = int(e.args["step_num"])
            if start_us is None and step == start_step:
                start_us = e.start_us
            if end_us is None and step == end_step:
                end_us = e.start_us - 1
            if start_us is not None and end_us is not None:
                return start_us, end_us
        log.info("Invalid step interval [%s, %s]", start_step, end_step)
        return 0, 0

    def get_events(self, start_time: float, end_time: float, unit: TimeUnits = TimeUnits.MICROSECONDS,
                   event_type: str | None = None, file_suffix_filter: Iterable[str] | None = None) -> list[Any]:
        raise NotImplementedError

    def get_events_by_step(self, start_step: int, end_step: int, event_type: str | None = None,
                           file_suffix_filter: Iterable[str] | None = None) -> list[Any]:
        start, end = self._get_time_interval_for_step(start_step, end_step)
        return self.get_events(start, end, TimeUnits.MICROSECONDS, event_type, file_suffix_filter)


class SystemMetricsReader(MetricsReaderBase):
    stream = SYSTEM
    prefix = "system"

    def get_events(self, start_time: float, end_time: float, unit: TimeUnits = TimeUnits.MICROSECONDS,
                   event_type: str | None = None, file_suffix_filter: Iterable[str] | None = None
                   ) -> list[SystemEvent]:
        """System samples with start <= timestamp <= end, of type `event_type` ("cpu", "gpu", ...)
        when given; sorted by time."""
        start, end = self._range(start_time, end_time, unit)
        return system_events(self._reader, start, end, event_type)


def system_events(reader: ProfilerReader, start_us: int, end_us: int, event_type: str | None = None
                  ) -> list[SystemEvent]:
    keys, stamps, values, which = system_columns(reader, start_us, end_us, event_type)
    return [SystemEvent.of(keys[k], int(t), v) for t, v, k in zip(stamps.tolist(), values.tolist(), which.tolist(),
                                                                    strict=True)]


def system_columns(reader: ProfilerReader, start_us: int | None, end_us: int | None, event_type: str | None = None,
                   names: Iterable[str] | None = None
                   ) -> tuple[list[SeriesKey], np.ndarray, np.ndarray, np.ndarray]:
    """Every sample in [start, end] (None: unbounded) as columns sorted by time, then by series:
    (keys, timestamps µs, values, index into keys)."""
    wanted = set(names) if names else None
    keys = [k for k in reader.system.keys(type=event_type) if wanted is None or k.name in wanted]
    parts = [reader.system.series(k, start_us, None if end_us is None else end_us + 1) for k in keys]
    if not parts:
        return keys, np.empty(0, np.int64), np.empty(0), np.empty(0, np.int64)
    stamps = np.concatenate([p.timestamps_us for p in parts])
    values = np.concatenate([p.values for p in parts])
    which = np.concatenate([np.full(len(p), i, np.int64) for i, p in enumerate(parts)])
    order = np.lexsort((which, stamps))
    return keys, stamps[order], values[order], which[order]


class AlgorithmMetricsReader(MetricsReaderBase):
    stream = FRAMEWORK
    prefix = "framework"

    def __init__(self, location: str | Path, use_in_memory_cache: bool = False, **kwargs: Any) -> None:
        self._factory = FrameworkEventFactory()
        super().__init__(location, use_in_memory_cache, **kwargs)

    def get_events(self, start_time: float, end_time: float, unit: TimeUnits = TimeUnits.MICROSECONDS,
                   event_type: str | None = None, file_suffix_filter: Iterable[str] | None = None
                   ) -> list[FrameworkEvent]:
        """Framework events overlapping [start, end] (both included), sorted by start; of the
        files whose name ends with one of `file_suffix_filter` when given."""
        start, end = self._range(start_time, end_time, unit)
        return [self._factory(e) for e in framework_records(self._reader, start, end, file_suffix_filter)]


def framework_records(reader: ProfilerReader, start_us: int | None, end_us: int | None,
                      file_suffix_filter: Iterable[str] | None = None) -> list[TraceEvent]:
    """sdlocal's trace records overlapping [start, end] (both included; None: unbounded)."""
    suffixes = tuple(file_suffix_filter) if file_suffix_filter is not None else None
    lo = None if start_us is None else start_us - 1
    hi = None if end_us is None else end_us + 1
    out = []
    for e in reader.framework.events(lo, hi):
        if start_us is not None and e.end_us < start_us:
            continue
        if suffixes is not None and not e.source.endswith(suffixes):
            continue
        out.append(e)
    return out


def _check_s3(path: str, cls: str) -> None:
    if not str(path).startswith("s3://"):
        raise ValueError(f"{cls}: the trial path is expected to be an S3 path, e.g. s3://bucket_name/trial_folder, "
                         f"not {path!r}")


def _check_local(path: str | Path, cls: str) -> None:
    if str(path).startswith("s3://"):
        raise ValueError(f"{cls}: {path!r} is an S3 path: use S3{cls[len('Local'):]}")


class LocalSystemMetricsReader(SystemMetricsReader):
    def __init__(self, trace_root_folder: str | Path, use_in_memory_cache: bool = False, **kwargs: Any) -> None:
        _check_local(trace_root_folder, type(self).__name__)
        self.trace_root_folder = str(trace_root_folder)
        super().__init__(Path(trace_root_folder).expanduser(), use_in_memory_cache, **kwargs)


class S3SystemMetricsReader(SystemMetricsReader):
    def __init__(self, s3_trial_path: str, use_in_memory_cache: bool = False, **kwargs: Any) -> None:
        _check_s3(s3_trial_path, type(self).__name__)
        super().__init__(s3_trial_path, use_in_memory_cache, **kwargs)
        self.bucket_name, _, self.base_folder = s3_trial_path[len("s3://"):].partition("/")


class LocalAlgorithmMetricsReader(AlgorithmMetricsReader):
    def __init__(self, trace_root_folder: str | Path, use_in_memory_cache: bool = False, **kwargs: Any) -> None:
        _check_local(trace_root_folder, type(self).__name__)
        self.trace_root_folder = str(trace_root_folder)
        super().__init__(Path(trace_root_folder).expanduser(), use_in_memory_cache, **kwargs)


class S3AlgorithmMetricsReader(AlgorithmMetricsReader):
    def __init__(self, s3_trial_path: str, use_in_memory_cache: bool = False, **kwargs: Any) -> None:
        _check_s3(s3_trial_path, type(self).__name__)
        super().__init__(s3_trial_path, use_in_memory_cache, **kwargs)
        self.bucket_name, _, self.base_folder = s3_trial_path[len("s3://"):].partition("/")


def readers_for(path: str, use_in_memory_cache: bool = False, **kwargs: Any
                ) -> tuple[SystemMetricsReader, AlgorithmMetricsReader]:
    """smdebug's pair for a path (S3 or local), sharing one ProfilerReader: one listing and one
    read of each file for both."""
    shared = ProfilerReader(path if path.startswith("s3://") else Path(path).expanduser(), **kwargs)
    if path.startswith("s3://"):
        return (S3SystemMetricsReader(path, use_in_memory_cache, reader=shared),
                S3AlgorithmMetricsReader(path, use_in_memory_cache, reader=shared))
    return (LocalSystemMetricsReader(path, use_in_memory_cache, reader=shared),
            LocalAlgorithmMetricsReader(path, use_in_memory_cache, reader=shared))


def now_us() -> int:
    return int(time.time() * 1_000_000)
