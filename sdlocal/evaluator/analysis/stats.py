"""smdebug's PandasFrameAnalysis: statistics over PandasFrame's system and framework frames.

    analysis = PandasFrameAnalysis(system_df, framework_df)
    analysis.get_job_statistics()                                  # JobStats: start/end, initialization, ...
    analysis.get_step_statistics(by=StatsBy.TRAINING_PHASE)       # duration_mean_us ... duration_p99_us
    analysis.get_utilization_stats(by=StatsBy.TRAINING_PHASE)     # Resource, Training_phase, nodeID, utilization_*
    analysis.get_device_usage_stats(); analysis.get_training_phase_intervals()

Columns, names and units are smdebug's (percentiles by linear interpolation, as pandas'
`describe`). Differences from smdebug 1.0.34, each a fix of a figure it got wrong:
- the frames given are not changed: the columns smdebug added to them (duration_us, a rewritten
  step, phase, ranges) are on copies, `analysis.framework_metrics_df` / `analysis.sys_metrics_df`;
- `initialization` is measured from the first system sample, as its notebooks say (smdebug
  measured it from the first system file's period start, so that initialization, training loop
  and finalization added up to more than the job);
- per framework metric or process, a step's events are grouped by the mode of the step they ran in
  (smdebug grouped TRAIN step 3 with EVAL step 3);
- CPU and GPU utilization figures are those of the CPUUtilization and GPUUtilization series
  (smdebug mixed in every series of type cpu/gpu: I/OWaitPercentage, GPUMemoryUtilization);
- an event without a step and outside every step keeps step -1 (smdebug raised IndexError).
"""
from __future__ import annotations

import logging
from enum import Enum
from typing import Any

import numpy as np

from sdlocal.evaluator.analysis._deps import pandas

log = logging.getLogger(__name__)

PERCENTILES = [0.5, 0.95, 0.99]
STEP_PHASES = ("Step:ModeKeys.TRAIN", "Step:ModeKeys.GLOBAL")
# the series that say how busy a device is, per resource type (the other series of a type are
# not utilization: I/O wait, GPU memory)
UTILIZATION_DIMENSIONS = {"cpu": "CPUUtilization", "gpu": "GPUUtilization"}


class StatsBy(Enum):
    TRAINING_PHASE = "training_phase"  # Step:ModeKeys.TRAIN / EVAL / GLOBAL
    FRAMEWORK_METRICS = "framework_metric"  # event names
    PROCESS = "process"  # event phases


class Resource(Enum):
    CPU = "cpu"
    GPU = "gpu"
    IO = "i/o"
    NETWORK = "network"
    MEMORY = "memory"


class JobStats(dict):
    """get_job_statistics()'s figures: a dict shown as a one-column table, as in smdebug's notebooks."""

    def _frame(self) -> Any:
        pd = pandas()
        return pd.DataFrame({0: pd.Series(dict(self), dtype=object)})

    def __repr__(self) -> str:
        return repr(self._frame())

    def _repr_html_(self) -> str:
        return str(self._frame().to_html())


def _describe(grouped: Any) -> Any:
    """mean, min, max, 50%, 95%, 99% of a grouped series, one row per group."""
    out = grouped.describe(percentiles=PERCENTILES).reset_index()
    out.columns.name = ""
    return out


class PandasFrameAnalysis:
    def __init__(self, system_df: Any, framework_df: Any) -> None:
        pandas()
        self.sys_metrics_df = system_df.copy()
        self.framework_metrics_df = framework_df.copy()
        fw = self.framework_metrics_df
        fw["duration_us"] = fw["end_time_us"] - fw["start_time_us"]
        self._get_step_numbers()

    # ---- steps --------------------------------------------------------------------------------------
    def _step_rows(self) -> Any:
        fw = self.framework_metrics_df
        return fw[fw["framework_metric"].astype(str).str.contains("Step:ModeKeys", regex=False)]

    def _get_step_numbers(self) -> None:
        """Events without a step number (-1) take the step whose interval strictly contains them;
        every row gets `step_phase`: the Step phase of the step event it runs in (or its own)."""
        fw = self.framework_metrics_df
        steps = self._step_rows()
        numbered = steps[steps["step"] != -1]
        by_step = numbered.groupby("step").agg(start_time_us=("start_time_us", "min"),
                                               end_time_us=("end_time_us", "max")).reset_index()
        self.step_time_df = by_step
        if len(fw) == 0:
            fw["step_phase"] = []
            return
        start = fw["start_time_us"].to_numpy()
        end = fw["end_time_us"].to_numpy()
        step = fw["step"].to_numpy().copy()
        missing = np.flatnonzero(step == -1)
        if missing.size and len(by_step):
            s0, s1, sn = (by_step[c].to_numpy() for c in ("start_time_us", "end_time_us", "step"))
            for i in missing.tolist():
                inside = np.flatnonzero((s0 < start[i]) & (s1 > end[i]))
                if inside.size:
                    step[i] = sn[inside[0]]
        fw["step"] = step
        # the mode of each row: the step event (sorted by start) whose interval holds the row's start
        phases = np.full(len(fw), "", dtype=object)
        if len(steps):
            order = np.argsort(steps["start_time_us"].to_numpy(), kind="stable")
            s_start = steps["start_time_us"].to_numpy()[order]
            s_end = steps["end_time_us"].to_numpy()[order]
            s_phase = steps["framework_metric"].to_numpy()[order]
            at = np.searchsorted(s_start, start, side="right") - 1
            ok = (at >= 0) & (start <= s_end[np.clip(at, 0, None)])
            phases[ok] = s_phase[at[ok]]
        is_step = fw["framework_metric"].astype(str).str.contains("Step:ModeKeys", regex=False).to_numpy()
        phases[is_step] = fw["framework_metric"].to_numpy()[is_step]
        fw["step_phase"] = phases

    def get_job_statistics(self) -> JobStats:
        """When the job (its system samples) started and ended; the training loop (from step 0 of
        TRAIN or GLOBAL to the last framework event); initialization before it and finalization
        after it, in µs and in % of the job."""
        sys, fw = self.sys_metrics_df, self.framework_metrics_df
        stats = JobStats()
        stats["start_time"] = min(sys["timestamp"])
        stats["end_time"] = max(sys["timestamp"])
        first_us, last_us = int(sys["timestamp_us"].min()), int(sys["timestamp_us"].max())
        stats["job_duration"] = last_us - first_us
        step_0 = fw[(fw["step"] == 0) & fw["framework_metric"].isin(STEP_PHASES)].sort_values("start_time_us")
        if step_0.empty:
            raise ValueError("no step 0 of TRAIN or GLOBAL mode in the framework metrics: the training loop's start "
                             "is unknown (select 'Step:ModeKeys.TRAIN' and 'Step:ModeKeys.GLOBAL')")
        loop_start_us = int(step_0["start_time_us"].iloc[0])
        loop_end_us = int(fw["end_time_us"].max())
        stats["training_loop_start"] = step_0["start_time"].iloc[0]
        stats["training_loop_end"] = max(fw["end_time"])
        stats["training_loop_duration"] = loop_end_us - loop_start_us
        stats["initialization"] = loop_start_us - first_us
        stats["finalization"] = last_us - loop_end_us
        for part, key in (("initialization", "initialization"), ("training_loop", "training_loop_duration"),
                          ("finalization", "finalization")):
            stats[f"{part}_%"] = stats[key] / stats["job_duration"] * 100 if stats["job_duration"] else float("nan")
        return stats

    def get_step_statistics(self, by: StatsBy = StatsBy.TRAINING_PHASE) -> Any:
        """Mean, min, max, p50, p95, p99 of step durations (µs): of the Step phases
        (TRAINING_PHASE), or per event name (FRAMEWORK_METRICS) or phase (PROCESS), a step's
        events of one name taken together (first start to last end)."""
        if not isinstance(by, StatsBy):
            log.info("%s should be of type StatsBy", by)
            return None
        column = by.value
        if by is StatsBy.TRAINING_PHASE:
            rows, group, column = self._step_rows(), ["step", "framework_metric"], "framework_metric"
        else:
            rows, group = self.framework_metrics_df, ["step_phase", "step", column]
        spans = rows.groupby(group).agg(start_time_us=("start_time_us", "min"),
                                        end_time_us=("end_time_us", "max")).reset_index()
        spans["duration_us"] = spans["end_time_us"] - spans["start_time_us"]
        stats = _describe(spans.groupby(column)["duration_us"])
        stats = stats[[column, "mean", "min", "max", "50%", "95%", "99%"]]
        stats.columns = [by.value, "duration_mean_us", "duration_min_us", "duration_max_us", "duration_p50_us",
                         "duration_p95_us", "duration_p99_us"]
        return stats

    # ---- system utilization ------------------------------------------------------------------------------
    def _resource_rows(self, sys: Any, resource: str) -> Any:
        rows = sys[sys["type"].astype(str).str.contains(resource, regex=False)]
        dimension = UTILIZATION_DIMENSIONS.get(resource)
        return rows if dimension is None else rows[rows["dimension"] == dimension]

    def _phase_of_samples(self, intervals: Any) -> Any:
        """The phase of each system sample: of the last interval (by start) holding it."""
        sys = self.sys_metrics_df.copy()
        phase = np.full(len(sys), None, dtype=object)
        if intervals is not None and len(intervals):
            iv = intervals.sort_values("start_time_us", kind="stable")
            s0, s1 = iv["start_time_us"].to_numpy(), iv["end_time_us"].to_numpy()
            names = iv["phase"].to_numpy()
            ts = sys["timestamp_us"].to_numpy()
            at = np.searchsorted(s0, ts, side="right") - 1
            ok = (at >= 0) & (ts <= s1[np.clip(at, 0, None)])
            phase[ok] = names[at[ok]]
        sys["phase"] = phase
        return sys

    def get_utilization_stats(self, resource: Resource | list[Resource] | None = None, by: StatsBy | None = None,
                              phase: str | list[str] | None = None) -> Any:
        """Utilization statistics per resource and node (and per training phase interval with
        by=StatsBy.TRAINING_PHASE): utilization_mean/min/max/p50/p95/p99."""
        pd = pandas()
        if by is not None and not isinstance(by, StatsBy):
            log.info("%s should be of type StatsBy", by)
            return None
        if resource is not None and not isinstance(resource, (list, Resource)):
            log.info("%s should be of type list or Resource", resource)
            return None
        if resource is None:
            resources = [r.value for r in (Resource.CPU, Resource.GPU, Resource.MEMORY, Resource.IO, Resource.NETWORK)]
        else:
            resources = [r.value for r in ([resource] if isinstance(resource, Resource) else resource)]
        per_phase = by == StatsBy.TRAINING_PHASE
        sys = self._phase_of_samples(self.get_training_phase_intervals(phase)) if per_phase else self.sys_metrics_df
        parts = []
        for name in resources:
            rows = self._resource_rows(sys, name)
            if per_phase:
                rows = rows[rows["phase"].notna()]
            if rows.empty:
                continue
            keys = ["phase", "nodeID"] if per_phase else ["nodeID"]
            part = _describe(rows.groupby(keys)["value"])
            part.insert(0, "Resource", name)
            parts.append(part[["Resource", *keys, "mean", "min", "max", "50%", "95%", "99%"]])
        columns = ["Resource", "nodeID", "utilization_mean", "utilization_min", "utilization_max", "utilization_p50",
                   "utilization_p95", "utilization_p99"]
        if per_phase:
            columns.insert(1, "Training_phase")
        if not parts:
            return pd.DataFrame(columns=columns)
        stats = pd.concat(parts).reset_index(drop=True)
        stats.columns = columns
        return stats

    def get_device_usage_stats(self, device: Resource | list[Resource] | None = None,
                               utilization_ranges: list[tuple[float, float]] | None = None) -> Any:
        """How many samples of each device fell in each utilization range (default >90, 10-90, <10),
        per type and node: one column per range met."""
        pd = pandas()
        if device is not None and not isinstance(device, (list, Resource)):
            log.info("%s should be of type list or Resource", device)
            return pd.DataFrame()
        devices = [Resource.CPU.value, Resource.GPU.value] if device is None else \
            [r.value for r in ([device] if isinstance(device, Resource) else device)]
        ranges = [(90, 100), (10, 90), (0, 10)] if utilization_ranges is None else utilization_ranges
        if not isinstance(ranges, list) or not ranges or any(len(r) != 2 for r in ranges):
            log.info("%s should be a non-empty list of (start, end) tuples", utilization_ranges)
            return pd.DataFrame()
        rows = pd.concat([self._resource_rows(self.sys_metrics_df, d) for d in devices])
        values = rows["value"].to_numpy(dtype=float)
        which = np.full(len(rows), -1)
        for i, (lo, hi) in reversed(list(enumerate(ranges))):
            which[(lo <= values) & (values <= hi)] = i  # the first range that holds a value wins
        rows = rows.assign(ranges=[tuple(ranges[i]) if i >= 0 else () for i in which.tolist()])
        rows = rows[which >= 0]
        if rows.empty:
            return rows
        counts = rows.groupby(["type", "nodeID", "ranges"]).size().rename("count").reset_index()
        table = counts.pivot(index=["type", "nodeID"], columns="ranges", values="count").reset_index()
        return table.fillna(0)

    def get_training_phase_intervals(self, phase: str | list[str] | None = None) -> Any:
        """The job split into intervals: "Before <phase>", each run of consecutive steps of one
        phase, "Between <a> and <b>", "After <phase>" (start_time_us, end_time_us, phase)."""
        pd = pandas()
        fw = self.framework_metrics_df
        processes = list(fw["process"].unique())
        if phase is None:
            phase = [p for p in processes if "Step:ModeKeys" in str(p)]
        if isinstance(phase, str):
            phase = [phase]
        if not isinstance(phase, list):
            log.info("%s should be a list of strings", phase)
            return None
        phase = [p for p in phase if p in processes]
        if not phase:
            log.info("None of the phase strings matched the phases available in the framework metrics DataFrame")
            return None
        mode = fw[fw["framework_metric"].isin(phase)].sort_values("start_time_us", kind="stable")
        names = mode["framework_metric"].to_numpy()
        run = np.concatenate([[0], np.cumsum(names[1:] != names[:-1])]) if len(names) else np.empty(0, int)
        runs = mode.assign(run=run).groupby("run").agg(start_time_us=("start_time_us", "min"),
                                                        end_time_us=("end_time_us", "max"),
                                                        phase=("framework_metric", "first"))
        rows: list[tuple[int, int, str]] = []
        first_sample, last_sample = self.sys_metrics_df["timestamp_us"].min(), self.sys_metrics_df["timestamp_us"].max()
        listed = list(runs.itertuples(index=False))
        rows.append((int(first_sample), int(listed[0].start_time_us) - 1, f"Before {listed[0].phase}"))
        for i, r in enumerate(listed):
            rows.append((int(r.start_time_us), int(r.end_time_us), str(r.phase)))
            if i + 1 < len(listed):
                nxt = listed[i + 1]
                between = " and ".join(sorted([str(r.phase), str(nxt.phase)]))
                rows.append((int(r.end_time_us) + 1, int(nxt.start_time_us) - 1, f"Between {between}"))
        rows.append((int(listed[-1].end_time_us) + 1, int(last_sample), f"After {listed[-1].phase}"))
        return pd.DataFrame(rows, columns=["start_time_us", "end_time_us", "phase"])
