"""smdebug's PandasFrame: a job's profiler data as pandas DataFrames, with smdebug's columns.

    pf = PandasFrame("s3://bucket/out/job/profiler-output")      # or the job's local profiler folder
    system_df = pf.get_all_system_metrics()
    framework_df = pf.get_all_framework_metrics(selected_framework_metrics=["Step:ModeKeys.TRAIN"])

System frame: timestamp ("%Y-%m-%dT%H:%M:%S:%f", UTC), timestamp_us, value, system_metric (the
series' name: cpu0, gpu1, MemoryUsedPercent, ...), dimension, nodeID, type. Framework frame:
start_time, end_time (the same text form), start_time_us, end_time_us, tid, pid,
framework_metric (the event's name, or its args' layer_name / name), step (args step_num, else
-1), bytes (args bytes_fetched, else -1), process (the phase: "Step:ModeKeys.TRAIN", "Forward",
...), nodeID. The `_us` columns are microseconds since the first system-metrics file's timestamp
(`pf.start_time`, the start of that file's period), as smdebug's.

Built from sdlocal's reader's columns, not event by event. Differences from smdebug, each a
fix: `get_framework_metrics_by_timesteps` counts every timestamp given (smdebug skipped the last
one, and all of them past its first 5000 s chunk boundary); rows of one instant come in the
reader's series order (smdebug: the file's line order).
"""
from __future__ import annotations

import bisect
import logging
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from sdlocal.evaluator.analysis._deps import pandas
from sdlocal.evaluator.analysis.events import frame_fields, human_time, parse_human_time, smdebug_node_id
from sdlocal.evaluator.analysis.readers import framework_records, readers_for, system_columns
from sdlocal.trial.profiler import TraceEvent

log = logging.getLogger(__name__)

SYSTEM_COLUMNS = ["timestamp", "timestamp_us", "value", "system_metric", "dimension", "nodeID", "type"]
FRAMEWORK_COLUMNS = ["start_time", "end_time", "start_time_us", "end_time_us", "tid", "pid", "framework_metric",
                     "step", "bytes", "process", "nodeID"]
DATALOADER_COLUMNS = ["start_time", "end_time", "start_time_us", "end_time_us", "duration_us", "pid",
                      "framework_metric", "step", "worker_id", "num_workers", "pin_memory", "process", "node_id"]
SCAN_INTERVAL_US = 5_000_000_000  # smdebug's scan_interval: what get_all_system_metrics reads past the last file


def human_times(us: np.ndarray) -> list[str]:
    pd = pandas()
    if len(us) == 0:
        return []
    return list(pd.to_datetime(np.asarray(us, dtype=np.int64), unit="us").strftime("%Y-%m-%dT%H:%M:%S:%f"))


def _drop_duplicates(df: Any) -> Any:
    return df[~df.duplicated()]  # smdebug returned df[df.duplicated() == False]: original row labels kept


class PandasFrame:
    def __init__(self, path: str, use_in_memory_cache: bool = False, scan_interval: int = SCAN_INTERVAL_US,
                 **reader_kwargs: Any) -> None:
        """`path`: a job's profiler-output (s3://bucket/prefix or a local folder). `reader_kwargs`:
        trial.profiler.ProfilerReader's (s3_client=, endpoint_url=)."""
        pandas()  # the extra is needed from here on: say so now, in one line
        self.path = str(path)
        self.step_time_mapping: dict[int, Any] = {}
        self.system_metrics_reader, self.framework_metrics_reader = readers_for(
            self.path, use_in_memory_cache, **reader_kwargs)
        self._reader = self.system_metrics_reader.profiler_reader
        self.system_metrics: list[list[Any]] = []
        self.framework_metrics: list[list[Any]] = []
        self.interval = scan_interval
        self.start_time = self.system_metrics_reader.get_timestamp_of_first_available_file()

    def __repr__(self) -> str:
        return f"<PandasFrame {self.path}>"

    # ---- whole job ---------------------------------------------------------------------------------
    def get_all_system_metrics(self, selected_system_metrics: Sequence[str] = ()) -> Any:
        """Every system sample (of the series named in `selected_system_metrics` when given)."""
        self.system_metrics_reader.refresh_event_file_list()
        start = self.system_metrics_reader.get_timestamp_of_first_available_file()
        end = self.system_metrics_reader.get_timestamp_of_latest_available_file() + self.interval
        return self.get_profiler_data_by_time(start, end, selected_system_metrics=selected_system_metrics,
                                              get_framework_metrics=False)[0]

    def get_all_framework_metrics(self, selected_framework_metrics: Sequence[str] = ()) -> Any:
        """Every framework event from the first system file on (smdebug's range), of the events or
        phases named in `selected_framework_metrics` when given."""
        self.framework_metrics_reader.refresh_event_file_list()
        start = self.system_metrics_reader.get_timestamp_of_first_available_file()
        end = self.framework_metrics_reader.get_timestamp_of_latest_available_file()
        return self.get_profiler_data_by_time(start, end, selected_framework_metrics=selected_framework_metrics,
                                              get_system_metrics=False)[1]

    def get_profiler_data_by_time(self, start_time_us: int, end_time_us: int, cache_metrics: bool = False,
                                  selected_framework_metrics: Sequence[str] = (),
                                  selected_system_metrics: Sequence[str] = (), get_framework_metrics: bool = True,
                                  get_system_metrics: bool = True) -> tuple[Any, Any]:
        """(system frame, framework frame) of [start, end] (epoch µs, both included)."""
        pd = pandas()
        rows: list[list[Any]] = []
        sys_df = None
        if get_system_metrics:
            sys_df = self._system_frame(int(start_time_us), int(end_time_us), selected_system_metrics)
            if cache_metrics:
                self.system_metrics.extend(sys_df.values.tolist())
                sys_df = pd.DataFrame(self.system_metrics, columns=SYSTEM_COLUMNS)
        if sys_df is None:
            sys_df = pd.DataFrame(rows, columns=SYSTEM_COLUMNS)
        fw_df = None
        if get_framework_metrics:
            self.framework_metrics_reader.refresh_event_file_list()
            events = self._select(framework_records(self._reader, int(start_time_us), int(end_time_us)),
                                  selected_framework_metrics)
            fw_df = self._framework_frame(events)
            if cache_metrics:
                self.framework_metrics.extend(fw_df.values.tolist())
                fw_df = pd.DataFrame(self.framework_metrics, columns=FRAMEWORK_COLUMNS)
        if fw_df is None:
            fw_df = self._framework_frame([])
        return _drop_duplicates(sys_df), _drop_duplicates(fw_df)

    def get_profiler_data_by_step(self, start_step: int, end_step: int, cache_metrics: bool = False
                                  ) -> tuple[Any, Any]:
        """Framework events of steps start..end (both included, any mode), and the system samples
        between the first start and the last end of those events."""
        sys_df, fw_df = self.get_all_system_metrics(), self.get_all_framework_metrics()
        fw_df = fw_df[fw_df["step"].between(start_step, end_step)]
        start, end = fw_df["start_time_us"].min(), fw_df["end_time_us"].max()
        return sys_df[sys_df["timestamp_us"].between(start, end)], fw_df

    # ---- framework metrics around given times ---------------------------------------------------------
    def convert_datetime_to_timestamp(self, timestamp: Any) -> int:
        """Microseconds since the epoch of a time as the frames print it (or a datetime)."""
        return parse_human_time(timestamp)

    def get_framework_metrics_by_timesteps(self, timestep_list: Iterable[Any] = (),
                                           selected_framework_metrics: Sequence[str] = ()
                                           ) -> tuple[dict[str, float], dict[str, int], dict[str, int]]:
        """For each time given (e.g. the timestamps of a CPU bottleneck), the events running at that
        instant (start < t < end). Returns (time per phase other than steps, normalised to the
        largest; time per event name other than steps, µs; time per step phase, µs), an event's
        duration counted once per time it spans."""
        stamps = sorted(self.convert_datetime_to_timestamp(t) for t in timestep_list)
        results: dict[str, int] = {}
        detailed: dict[str, int] = {}
        if stamps:
            events = self._select(framework_records(self._reader, stamps[0], stamps[-1]), selected_framework_metrics)
            for e in events:
                n = bisect.bisect_left(stamps, e.end_us) - bisect.bisect_right(stamps, e.start_us)
                if n <= 0:
                    continue
                spent = n * (e.end_us - e.start_us)
                results[e.phase] = results.get(e.phase, 0) + spent
                if "Step" not in e.name:
                    detailed[e.name] = detailed.get(e.name, 0) + spent
        training_phase = {k: v for k, v in results.items() if "Step" in k}
        framework = {k: v for k, v in results.items() if "Step" not in k}
        return _normalised(framework), detailed, training_phase

    def get_framework_metrics_by_begin_and_end_timesteps(self, begin_timestep_list: Iterable[Any],
                                                         end_timestep_list: Iterable[Any],
                                                         selected_framework_metrics: Sequence[str] = ()
                                                         ) -> tuple[dict[str, float], dict[str, float]]:
        """For each [begin, end] interval (e.g. the outlier steps), the events other than steps that
        overlap it: (time per phase, time per event name), each normalised to its largest."""
        intervals = [(self.convert_datetime_to_timestamp(b), self.convert_datetime_to_timestamp(e))
                     for b, e in zip(begin_timestep_list, end_timestep_list, strict=False)]
        framework: dict[str, int] = {}
        detailed: dict[str, int] = {}
        if intervals:
            lo, hi = min(b for b, _ in intervals), max(e for _, e in intervals)
            events = [e for e in self._select(framework_records(self._reader, lo, hi), selected_framework_metrics)
                      if "Step" not in e.name]
            starts = [e.start_us for e in events]
            longest = max((e.end_us - e.start_us for e in events), default=0)
            for begin, end in intervals:
                for e in events[bisect.bisect_left(starts, begin - longest):bisect.bisect_right(starts, end)]:
                    if e.end_us >= begin:
                        framework[e.phase] = framework.get(e.phase, 0) + e.end_us - e.start_us
                        detailed[e.name] = detailed.get(e.name, 0) + e.end_us - e.start_us
        if not framework:
            return {}, {}
        return _normalised(framework), _normalised(detailed)

    # ---- data loaders --------------------------------------------------------------------------------
    def get_all_dataloader_metrics(self, selected_framework_metrics: Sequence[str] = ()) -> Any:
        """The framework events with smdebug's data-loader columns (duration_us, worker_id,
        num_workers, pin_memory "True"/"False"/"NA", node_id); `selected_framework_metrics` are
        regular expressions searched in the event's name or phase."""
        import re

        pd = pandas()
        self.framework_metrics_reader.refresh_event_file_list()
        start = self.system_metrics_reader.get_timestamp_of_first_available_file()
        end = self.framework_metrics_reader.get_timestamp_of_latest_available_file()
        patterns = [re.compile(p) for p in selected_framework_metrics]
        rows = []
        for e in framework_records(self._reader, start, end):
            if patterns and not any(p.search(e.name) or p.search(e.phase) for p in patterns):
                continue
            _, pid, name, node, step = frame_fields(e)
            args = e.args or {}
            pin = args.get("pin_memory")
            rows.append([human_time(e.start_us), human_time(e.end_us), e.start_us - self.start_time,
                         e.end_us - self.start_time, e.end_us - e.start_us, pid, name, step,
                         args.get("worker_id", -1), args.get("num_workers", -1),
                         "NA" if pin is None else ("True" if pin is True else "False"), e.phase, node])
        return _drop_duplicates(pd.DataFrame(rows, columns=DATALOADER_COLUMNS))

    # ---- internals ---------------------------------------------------------------------------------
    @staticmethod
    def _select(events: list[TraceEvent], selected: Sequence[str]) -> list[TraceEvent]:
        if not selected:
            return events
        wanted = set(selected)
        return [e for e in events if e.name in wanted or e.phase in wanted]

    def _system_frame(self, start_us: int, end_us: int, selected: Sequence[str]) -> Any:
        pd = pandas()
        keys, stamps, values, which = system_columns(self._reader, start_us, end_us, names=selected or None)
        pick = np.asarray(which, dtype=np.int64)
        return pd.DataFrame({
            "timestamp": human_times(stamps),
            "timestamp_us": stamps - self.start_time,
            "value": values,
            "system_metric": [keys[i].name for i in pick.tolist()],
            "dimension": [keys[i].dimension for i in pick.tolist()],
            "nodeID": [keys[i].node for i in pick.tolist()],
            "type": [keys[i].type for i in pick.tolist()],
        }, columns=SYSTEM_COLUMNS)

    def _framework_frame(self, events: list[TraceEvent]) -> Any:
        pd = pandas()
        starts = np.fromiter((e.start_us for e in events), np.int64, len(events))
        ends = np.fromiter((e.end_us for e in events), np.int64, len(events))
        fields = [frame_fields(e) for e in events]
        return pd.DataFrame({
            "start_time": human_times(starts),
            "end_time": human_times(ends),
            "start_time_us": starts - self.start_time,
            "end_time_us": ends - self.start_time,
            "tid": [f[0] for f in fields],
            "pid": [f[1] for f in fields],
            "framework_metric": [f[2] for f in fields],
            "step": np.fromiter((f[4] for f in fields), np.int64, len(fields)),
            "bytes": [(e.args or {}).get("bytes_fetched", -1) for e in events],
            "process": [e.phase for e in events],
            "nodeID": [f[3] for f in fields],
        }, columns=FRAMEWORK_COLUMNS)


def _normalised(totals: dict[str, int]) -> dict[str, float]:
    if not totals:
        return {}
    top = float(max(totals.values()))
    return {k: (v / top if top else 0.0) for k, v in totals.items()}


__all__ = ["PandasFrame", "smdebug_node_id"]
