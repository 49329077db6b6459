"""The ProfilerReport's figures and statistics tables: system utilization over time and step
durations. Each function returns markup, or a note saying why there is nothing to draw (no empty
plots)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sdlocal.evaluator.reports import _plots as plots
from sdlocal.evaluator.reports._page import Html, join, note, table
from sdlocal.evaluator.reports.profiler_input import StepDurations, SystemData, TimeSeries

HEATMAP_COLUMNS = 400
DEFAULT_OUTLIER_STDDEV = 3.0


@dataclass(frozen=True)
class TimeAxis:
    """Epoch µs → a readable offset from the job's start, in s, min or h by the job's length."""

    origin_us: int
    end_us: int
    unit: str
    divisor: float

    @classmethod
    def for_span(cls, origin_us: int, end_us: int) -> TimeAxis:
        span_s = max(0.0, (end_us - origin_us) / 1e6)
        if span_s <= 180:
            return cls(origin_us, end_us, "s", 1e6)
        if span_s <= 180 * 60:
            return cls(origin_us, end_us, "min", 60e6)
        return cls(origin_us, end_us, "h", 3600e6)

    @property
    def xlim(self) -> tuple[float, float] | None:
        """The whole job, so that every time chart spans the same range and they line up."""
        span = (self.end_us - self.origin_us) / self.divisor
        return (0.0, span) if span > 0 else None

    @property
    def label(self) -> str:
        return f"time since job start ({self.unit})"

    def __call__(self, stamps_us: np.ndarray) -> np.ndarray:
        return (np.asarray(stamps_us, dtype=np.float64) - self.origin_us) / self.divisor


def _lines(series: Sequence[TimeSeries], axis: TimeAxis, scale: float = 1.0) -> list[plots.Line]:
    return [plots.Line(axis(s.timestamps_us), s.values / scale, s.name) for s in series if len(s)]


def _mean_over(series: Sequence[TimeSeries]) -> tuple[np.ndarray, np.ndarray]:
    """(timestamps, mean across the series at each timestamp any of them has)."""
    stamps = np.unique(np.concatenate([s.timestamps_us for s in series]))
    total = np.zeros(stamps.size)
    count = np.zeros(stamps.size)
    for s in series:
        idx = np.searchsorted(stamps, s.timestamps_us)
        np.add.at(total, idx, s.values)
        np.add.at(count, idx, 1)
    return stamps, total / np.maximum(count, 1)


def _bucketed(series: Sequence[TimeSeries], start_us: int, end_us: int, columns: int) -> np.ndarray:
    """rows = series, columns = equal time buckets, mean per bucket, NaN where a bucket is empty."""
    span = max(1, end_us - start_us)
    out = np.full((len(series), columns), np.nan)
    for r, s in enumerate(series):
        col = np.clip(((s.timestamps_us - start_us) * columns) // span, 0, columns - 1).astype(np.int64)
        sums = np.bincount(col, weights=s.values, minlength=columns)
        counts = np.bincount(col, minlength=columns)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[r] = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    return out


def cpu_figures(system: SystemData, axis: TimeAxis) -> Html:
    cores = [s for s in system.cpu if len(s)]
    if not cores:
        return note("No CPU metrics were recorded.", "info")
    stamps, mean = _mean_over(cores)
    parts = [plots.line_chart(
        [plots.Line(axis(stamps), mean, f"all {len(cores)} cores (mean)", width=1.3)],
        title="CPU utilization", xlabel=axis.label, xlim=axis.xlim, ylabel="%", ylim=(0, 102),
        caption="Mean utilization of all cores at each sample.")]
    start = int(min(s.timestamps_us[0] for s in cores))
    end = int(max(s.timestamps_us[-1] for s in cores))
    if len(cores) > 1 and end > start:
        columns = min(HEATMAP_COLUMNS, max(2, len(stamps)))
        parts.append(plots.heatmap(
            _bucketed(cores, start, end, columns), title="CPU utilization per core",
            row_labels=[s.name for s in cores], xlabel=axis.label, xlim=axis.xlim,
            x_extent=(float(axis(np.array([start]))[0]), float(axis(np.array([end]))[0])),
            colorbar_label="%", vmin=0, vmax=100,
            caption="One row per core; bright is busy. A few bright rows over dark ones: the work does "
                    "not spread over the cores."))
    return join(parts)


def gpu_figures(system: SystemData, axis: TimeAxis) -> Html:
    if not any(len(s) for s in system.gpu) and not any(len(s) for s in system.gpu_memory):
        return note("No GPU metrics were recorded: the job ran without a GPU, or the sampler could not "
                    "read GPU figures (NVML). GPU rules have nothing to judge.", "info")
    parts = []
    if any(len(s) for s in system.gpu):
        parts.append(plots.line_chart(_lines(system.gpu, axis), title="GPU utilization", xlabel=axis.label, xlim=axis.xlim,
                                      ylabel="%", ylim=(0, 102)))
    if any(len(s) for s in system.gpu_memory):
        parts.append(plots.line_chart(_lines(system.gpu_memory, axis), title="GPU memory utilization",
                                      xlabel=axis.label, xlim=axis.xlim, ylabel="% of the GPU's memory", ylim=(0, 102)))
    return join(parts)


def other_system_figures(system: SystemData, axis: TimeAxis) -> Html:
    parts = []
    if any(len(s) for s in system.memory):
        parts.append(plots.line_chart(_lines(system.memory, axis), title="Memory used", xlabel=axis.label, xlim=axis.xlim,
                                      ylabel="% of memory", ylim=(0, 102), legend=len(system.memory) > 1))
    waits = [s for s in system.io_wait if len(s)]
    if waits:
        stamps, mean = _mean_over(waits)
        parts.append(plots.line_chart([plots.Line(axis(stamps), mean, "mean of all cores")],
                                      title="I/O wait", xlabel=axis.label, xlim=axis.xlim, ylabel="% of CPU time",
                                      ylim=(0, None), caption="Time the CPUs sat idle waiting for disk or "
                                                              "network reads."))
    if any(len(s) for s in system.network):
        parts.append(plots.line_chart(_lines(system.network, axis, 1e6), title="Network", xlabel=axis.label, xlim=axis.xlim,
                                      ylabel="MB/s", ylim=(0, None)))
    if any(len(s) for s in system.disk):
        parts.append(plots.line_chart(_lines(system.disk, axis, 1e6), title="Disk throughput",
                                      xlabel=axis.label, xlim=axis.xlim, ylabel="MB/s", ylim=(0, None)))
    return join(parts)


def _stats(values: np.ndarray) -> list[object]:
    v = values[np.isfinite(values)]
    if not v.size:
        return [None] * 6
    p50, p95, p99 = np.percentile(v, [50, 95, 99])
    return [float(p50), float(p95), float(p99), float(v.min()), float(v.max()), int(v.size)]


def system_stats_table(system: SystemData) -> Html:
    rows: list[list[object]] = []
    cores = [s for s in system.cpu if len(s)]
    if cores:
        rows.append(["CPU utilization (mean of cores)", "%", *_stats(_mean_over(cores)[1])])
    waits = [s for s in system.io_wait if len(s)]
    if waits:
        rows.append(["I/O wait (mean of cores)", "%", *_stats(_mean_over(waits)[1])])
    for label, group, unit, scale in (("GPU utilization", system.gpu, "%", 1.0),
                                      ("GPU memory", system.gpu_memory, "%", 1.0),
                                      ("Memory used", system.memory, "%", 1.0),
                                      ("Network", system.network, "MB/s", 1e6),
                                      ("Disk", system.disk, "MB/s", 1e6)):
        for s in group:
            if len(s):
                name = label if s.name in ("memory",) else f"{label} {s.name}"
                rows.append([name, unit, *_stats(s.values / scale)])
    if not rows:
        return Html("")
    return table(["Metric", "Unit", "p50", "p95", "p99", "Min", "Max", "Samples"], rows,
                 numeric=range(2, 8), caption="System usage statistics", class_="stats")


# ------------------------------------------------------------------------------------ step durations


def duration_unit(steps: Sequence[StepDurations]) -> tuple[str, float]:
    """("ms", 1e3) when the median step is under a second, else ("s", 1e6)."""
    allv = np.concatenate([s.duration_us for s in steps]) if steps else np.empty(0)
    return ("ms", 1e3) if allv.size == 0 or np.median(allv) < 1e6 else ("s", 1e6)


def outlier_threshold(durations: np.ndarray, stddev: float) -> float | None:
    """mean + stddev·std, StepOutlier's criterion; None for fewer than 3 steps or no spread."""
    if durations.size < 3:
        return None
    std = float(np.std(durations))
    return float(np.mean(durations) + stddev * std) if std > 0 else None


def step_figures(steps: Sequence[StepDurations], axis: TimeAxis, stddev: float) -> Html:
    steps = [s for s in steps if len(s)]
    if not steps:
        return note("No framework trace was recorded, so there are no step durations: the hook did not "
                    "record steps (no profiler framework configuration, or the script never reached its "
                    "first step).", "info")
    unit, div = duration_unit(steps)
    lines: list[plots.Line] = []
    outliers_x: list[np.ndarray] = []
    outliers_y: list[np.ndarray] = []
    for i, s in enumerate(steps):
        d = s.duration_us / div
        lines.append(plots.Line(axis(s.start_us), d, f"{s.mode} ({len(s):,} steps)", kind="points",
                                color=plots.PALETTE[i % len(plots.PALETTE)], size=3.0 if len(s) < 2000 else 2.0))
        limit = outlier_threshold(d, stddev)
        if limit is not None:
            mask = d > limit
            outliers_x.append(axis(s.start_us[mask]))
            outliers_y.append(d[mask])
    n_out = sum(x.size for x in outliers_x)
    if n_out:
        lines.append(plots.Line(np.concatenate(outliers_x), np.concatenate(outliers_y),
                                f"outliers: {n_out:,} above mean + {stddev:g}σ", kind="points",
                                color=plots.HIGHLIGHT, size=5.0))
    parts = [plots.line_chart(lines, title="Step durations over time", xlabel=axis.label, xlim=axis.xlim,
                              ylabel=f"step duration ({unit})", ylim=(0, None),
                              caption="One dot per step, at its start. Red dots: steps longer than the mean "
                                      f"plus {stddev:g} standard deviations of their mode (StepOutlier's "
                                      "criterion).")]
    if sum(len(s) for s in steps) >= 2:
        train = steps[0]
        marks = []
        limit = outlier_threshold(train.duration_us / div, stddev)
        if limit is not None:
            marks.append(plots.Mark(limit, f"{train.mode} mean + {stddev:g}σ", axis="x"))
        parts.append(plots.histogram([(s.mode, s.duration_us / div) for s in steps],
                                     title="Step duration histogram", xlabel=f"step duration ({unit})",
                                     ylabel="steps", marks=marks, logy=True,
                                     caption="Counts on a log scale, so that rare slow steps stay visible."))
    return join(parts)


def step_stats_table(steps: Sequence[StepDurations], stddev: float) -> Html:
    steps = [s for s in steps if len(s)]
    if not steps:
        return Html("")
    unit, div = duration_unit(steps)
    rows = []
    for s in steps:
        d = s.duration_us / div
        limit = outlier_threshold(d, stddev)
        p50, p95, p99 = np.percentile(d, [50, 95, 99])
        rows.append([s.mode, len(s), float(np.mean(d)), float(p50), float(p95), float(p99), float(d.min()),
                     float(d.max()), int((d > limit).sum()) if limit is not None else 0])
    return table(["Mode", "Steps", f"Mean ({unit})", "p50", "p95", "p99", "Min", "Max",
                  f"Outliers (> mean + {stddev:g}σ)"], rows, numeric=range(1, 9),
                 caption="Step duration statistics", class_="stats")
