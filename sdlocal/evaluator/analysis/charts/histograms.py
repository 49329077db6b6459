"""smdebug's MetricsHistogram (system metrics) and StepHistogram (framework phase durations), on
bokeh 3.

    hist = MetricsHistogram(system_metrics_reader)
    hist.plot(starttime=0, endtime=reader.get_timestamp_of_latest_available_file(),
              select_dimensions=["CPU", "GPU"], select_events=["total"])
    hist.update_data(reader.get_timestamp_of_latest_available_file())   # a live job: new samples
    StepHistogram(framework_metrics_reader).plot()

One histogram per (dimension, series) or per phase, four to a row; `sources` holds their data.
Differences from smdebug: durations are in seconds and labelled so (smdebug divided µs by 10^6
and labelled the axis "ms"); the last percent bin holds 98-100 % (smdebug's bins ended at 98 and
left a busy core's samples out); series that are not percentages get bins over their own range.
"""
from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from sdlocal.evaluator.analysis.charts._base import (
    Chart,
    SystemSeries,
    bokeh,
    histogram,
    is_percent,
    matching,
)

log = logging.getLogger(__name__)

MICROS = 1_000_000.0
DEFAULT_STEP_METRICS = ("Step:ModeKeys", "Forward-node", r"Backward\(post-forward\)-node")


def _histogram_figure(source: Any, x_label: str, size: int) -> Any:
    from bokeh.plotting import figure

    p = figure(height=size, width=size, tools="pan,wheel_zoom,reset,save")
    p.quad(top="top", bottom=0, left="left", right="right", source=source, fill_color="navy",
           line_color="white", fill_alpha=0.5)
    p.y_range.start = 0
    p.xaxis.axis_label = x_label
    p.yaxis.axis_label = "Occurrences"
    p.grid.grid_line_color = "white"
    return p


def _data(counts: np.ndarray, edges: np.ndarray) -> dict[str, Any]:
    return {"top": counts, "left": edges[:-1], "right": edges[1:]}


class MetricsHistogram(Chart):
    def __init__(self, metrics_reader: Any) -> None:
        bokeh()
        self.metrics_reader = metrics_reader
        self.system_metrics: dict[str, dict[str, np.ndarray]] = {}
        self.select_dimensions: Sequence[str] = []
        self.select_events: Sequence[str] = []
        self.sources: dict[str, dict[str, Any]] = {}
        self.available_dimensions: list[str] = []
        self.available_events: list[str] = []
        self.filtered_dimensions: list[str] = []
        self.filtered_events: list[str] = []
        self.last_timestamp = 0
        self._series = SystemSeries(True)

    def plot(self, starttime: int = 0, endtime: int | None = None, select_dimensions: Sequence[str] = (".*",),
             select_events: Sequence[str] = (".*",), show_workers: bool = True) -> Any:
        """Histograms of the samples between starttime and endtime (µs; default: the latest file)."""
        if endtime is None:
            endtime = self.metrics_reader.get_timestamp_of_latest_available_file()
        events = self.metrics_reader.get_events(starttime, endtime)
        print(f"Found {len(events)} system metrics events from timestamp_in_us:{starttime} to timestamp_in_us:{endtime}")
        self.last_timestamp = endtime
        self.select_dimensions, self.select_events = list(select_dimensions), list(select_events)
        self._series = SystemSeries(show_workers)
        self._series.add(events)
        self._refilter()
        self.create_plot()
        return self.layout

    def _refilter(self) -> None:
        self.system_metrics = self._series.arrays()
        self.available_dimensions = sorted(self.system_metrics)
        self.available_events = self._series.events()
        self.filtered_events = matching(self.select_events, self.available_events, ".*{}.*")
        self.filtered_dimensions = matching(self.select_dimensions, self.available_dimensions)

    def _panels(self) -> list[tuple[str, str]]:
        return [(d, e) for d in self.filtered_dimensions for e in self.filtered_events if e in self.system_metrics[d]]

    def create_plot(self) -> None:
        from bokeh.layouts import gridplot
        from bokeh.models import ColumnDataSource

        figures = []
        self.sources = {}
        for dim, event in self._panels():
            values = self.system_metrics[dim][event][:, 1]
            source = ColumnDataSource(data=_data(*histogram(values, is_percent(dim + event))))
            self.sources.setdefault(dim, {})[event] = source
            figures.append(_histogram_figure(source, f"{dim}_{event}", 250))
        if not figures:
            raise ValueError(f"no system metrics match dimensions {self.select_dimensions} and events "
                             f"{self.select_events} (available: {self.available_dimensions})")
        self.layout = gridplot(figures, ncols=4)
        self.show()

    def clear(self) -> None:
        self.system_metrics = {}
        self.sources = {}
        self._series = SystemSeries(self._series.show_workers)

    def update_data(self, current_timestamp: int) -> None:
        """Add the samples from the last update to `current_timestamp` (µs) and redraw."""
        events = self.metrics_reader.get_events(self.last_timestamp + 1, current_timestamp)
        self.last_timestamp = current_timestamp
        self._series.add(events)
        self._refilter()
        for dim, event in self._panels():
            if event in self.sources.get(dim, {}):
                values = self.system_metrics[dim][event][:, 1]
                self.sources[dim][event].data = _data(*histogram(values, is_percent(dim + event)))
        self.push()


class StepHistogram(Chart):
    def __init__(self, metrics_reader: Any, width: int = 500) -> None:
        bokeh()
        self.metrics_reader = metrics_reader
        self.last_timestamp = self.metrics_reader.get_timestamp_of_latest_available_file()
        print(f"StepHistogram created, last_timestamp found:{self.last_timestamp}")
        self.step_metrics: dict[str, list[float]] = {}
        self.sources: dict[str, Any] = {}
        self.width = width
        self.select_metrics: list[str] = list(DEFAULT_STEP_METRICS)
        self.show_workers = True

    def _add(self, events: Sequence[Any]) -> None:
        for e in events:
            key = f"{e.event_phase}-nodeid:{e.node_id}" if self.show_workers else e.event_phase
            self.step_metrics.setdefault(key, []).append(e.duration / MICROS)

    def _filtered(self) -> dict[str, list[float]]:
        keep = matching(self.select_metrics, self.step_metrics)
        return {k: self.step_metrics[k] for k in keep}

    def plot(self, starttime: int = 0, endtime: int | None = None,
             select_metrics: Sequence[str] = DEFAULT_STEP_METRICS, show_workers: bool = True) -> Any:
        """Histograms of the durations (s) of the phases matching `select_metrics` (regular
        expressions searched in "<phase>-nodeid:<node>")."""
        if endtime is None:
            endtime = self.metrics_reader.get_timestamp_of_latest_available_file()
        events = self.metrics_reader.get_events(starttime, endtime)
        print(f"Total events fetched:{len(events)}")
        self.last_timestamp = endtime
        self.select_metrics, self.show_workers = list(select_metrics), show_workers
        self.step_metrics = {}
        self._add(events)
        self.create_plot(self._filtered())
        return self.layout

    def clear(self) -> None:
        self.step_metrics = {}
        self.sources = {}

    @staticmethod
    def _bins(durations: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
        """smdebug's bins: 50 from the shortest to median + 2 std, the last duration left out (the
        step still open when the file was written; kept when it is the only one)."""
        v = np.asarray(durations, dtype=float)
        values = v[:-1] if v.size > 1 else v
        lo, hi = float(values.min()), float(np.median(values) + 2 * np.std(values))
        if hi <= lo:
            hi = lo + max(lo * 0.1, 1e-6)
        return np.histogram(values, bins=np.linspace(lo, hi, 51))

    def create_plot(self, step_metrics: dict[str, list[float]] | None = None) -> None:
        from bokeh.layouts import gridplot
        from bokeh.models import ColumnDataSource

        metrics = self._filtered() if step_metrics is None else step_metrics
        if not metrics:
            raise ValueError(f"no framework events match {self.select_metrics} (available: {sorted(self.step_metrics)})")
        figures = []
        self.sources = {}
        for metric, durations in metrics.items():
            source = ColumnDataSource(data=_data(*self._bins(durations)))
            self.sources[metric] = source
            figures.append(_histogram_figure(source, f"{metric} step time in s", 350))
        self.layout = gridplot(figures, ncols=4)
        self.show()

    def update_data(self, current_timestamp: int) -> None:
        previous = self.last_timestamp
        events = self.metrics_reader.get_events(previous + 1, current_timestamp)
        self.last_timestamp = current_timestamp
        self._add([e for e in events if e.start_time > previous])  # those before were counted already
        for metric, durations in self._filtered().items():
            if metric in self.sources:
                self.sources[metric].data = _data(*self._bins(durations))
        self.push()
