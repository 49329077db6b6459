"""smdebug's TimelineCharts (system metrics over time, with a drill-down into the framework events
of a selected range) and StepTimelineChart (step durations over time), on bokeh 3.

    view = TimelineCharts(system_reader, framework_reader, select_dimensions=["CPU", "GPU"],
                          select_events=["total"])
    view.find_time_annotations([400, 440])       # time spent per event in samples 400..440
    view.plot_detailed_profiler_data([400, 440])  # data loaders and framework events there, as bars
    StepTimelineChart(framework_reader)

x is seconds since the first sample (TimelineCharts) or the first step (StepTimelineChart), and
labelled so: smdebug plotted epoch seconds and step durations in seconds under "Time in ms".
Selecting a range with the box-select tool lists its sample indexes beside the charts, as smdebug's.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sdlocal.evaluator.analysis.charts._base import Chart, SystemSeries, bokeh, matching
from sdlocal.evaluator.analysis.events import TimeUnits

TOOLS = "crosshair,xbox_select,pan,reset,save,xwheel_zoom"
SELECTION_JS = """
const inds = source.selected.indices;
if (inds.length == 0) { return; }
const line = "<b>Selected index range: [" + Math.min(...inds) + "," + Math.max(...inds) + "]</b><br>";
const lines = (div.text + line).split("<br>").filter(l => l.length > 0);
div.text = lines.slice(-35).join("<br>") + "<br>";
"""


class TimelineCharts(Chart):
    def __init__(self, system_metrics_reader: Any, framework_metrics_reader: Any = None, starttime: int = 0,
                 endtime: int | None = None, select_dimensions: Sequence[str] = (".*",),
                 select_events: Sequence[str] = (".*",), x: int = 1000, show_workers: bool = True) -> None:
        bokeh()
        self.system_metrics_reader = system_metrics_reader
        self.framework_metrics_reader = framework_metrics_reader
        self.select_dimensions, self.select_events = list(select_dimensions), list(select_events)
        self.show_workers = show_workers
        self.sources: dict[str, dict[str, Any]] = {}
        self.figures: list[Any] = []
        self.last_timestamp_system_metrics = (system_metrics_reader.get_timestamp_of_latest_available_file()
                                              if endtime is None else endtime)
        self._series = SystemSeries(show_workers)
        self._series.add(system_metrics_reader.get_events(starttime, self.last_timestamp_system_metrics))
        self.system_metrics = self._series.arrays()
        if not self.system_metrics:
            raise ValueError(f"no system metrics between {starttime} and {self.last_timestamp_system_metrics} µs "
                             f"at {system_metrics_reader!r}")
        # x = 0 at the first sample (epoch seconds of it in self.start)
        self.start = min(float(a[:, 0].min()) for d in self.system_metrics.values() for a in d.values() if len(a))
        self.available_dimensions = sorted(self.system_metrics)
        self.available_events = self._series.events()
        self.filtered_events = matching(self.select_events, self.available_events, ".*{}")
        self.filtered_dimensions = matching(self.select_dimensions, self.available_dimensions)
        widths = [a["total"].shape[0] for k, a in self.system_metrics.items() if k.startswith("CPUUtilization")]
        self.width = min(x, max(min(widths, default=x) - 1, 1))
        self.create_plot()

    def _panels(self) -> list[tuple[str, str]]:
        return [(d, e) for d in self.filtered_dimensions for e in self.filtered_events if e in self.system_metrics[d]]

    def plot_system_metrics(self) -> list[Any]:
        from bokeh.models import ColumnDataSource, CustomJS, HoverTool
        from bokeh.plotting import figure

        self.figures, self.sources = [], {}
        x_range = None
        for dim, event in self._panels():
            values = self.system_metrics[dim][event]
            percent = "Utilization" in dim or "Memory" in dim or "Percent" in dim
            recent = values[-self.width:, 1]
            y_range = (0, 102) if percent else (float(recent.min()), float(recent.max()) or 1.0)
            xs = values[:, 0] - self.start
            if x_range is None:
                plot = figure(height=200, width=1000, tools=TOOLS, y_range=y_range,
                              x_range=(float(xs[-self.width]) if len(xs) > self.width else float(xs[0]), float(xs[-1])))
                x_range = plot.x_range
            else:
                plot = figure(height=200, width=1000, tools=TOOLS, y_range=y_range, x_range=x_range)
            plot.xgrid.visible = plot.ygrid.visible = False
            source = ColumnDataSource(data={"x": xs, "y": values[:, 1]})
            plot.line("x", "y", source=source, line_color="blue")
            dots = plot.scatter("x", "y", source=source, size=4, fill_alpha=0, line_alpha=0)
            plot.add_tools(HoverTool(renderers=[dots], tooltips=[("index", "$index"), ("(x,y)", "($x, $y)")]))
            plot.js_on_event("selectiongeometry", CustomJS(args={"source": source, "div": self.div}, code=SELECTION_JS))
            plot.xaxis.axis_label = "Time since the first sample in s"
            plot.yaxis.axis_label = f"{dim}_{event}"
            self.figures.append(plot)
            self.sources.setdefault(dim, {})[event] = source
        return self.figures

    def create_plot(self) -> None:
        from bokeh.layouts import column, row
        from bokeh.models import Div

        self.div = Div(width=250, height=100, height_policy="fixed")
        figures = self.plot_system_metrics()
        if not figures:
            raise ValueError(f"no system metrics match dimensions {self.select_dimensions} and events "
                             f"{self.select_events} (available: {self.available_dimensions})")
        self.layout = row(column(figures), self.div)
        self.show()

    def _range_of(self, indexes: Sequence[int]) -> tuple[float, float]:
        """Epoch seconds of the first and last of the selected sample indexes (of the CPU total)."""
        totals = [a["total"] for k, a in self.system_metrics.items() if k.startswith("CPUUtilization")]
        series = totals[0] if totals else next(iter(self.system_metrics.values()))["total"]
        lo, hi = int(np.clip(min(indexes), 0, len(series) - 1)), int(np.clip(max(indexes), 0, len(series) - 1))
        return float(series[lo, 0]), float(series[hi, 0])

    def _framework_events(self, indexes: Sequence[int]) -> tuple[float, float, list[Any]]:
        if self.framework_metrics_reader is None:
            raise ValueError("TimelineCharts was made without a framework_metrics_reader: no framework events")
        begin, end = self._range_of(indexes)
        print(f"Selected timerange: {begin} to {end}")
        return begin, end, self.framework_metrics_reader.get_events(begin, end, unit=TimeUnits.SECONDS)

    def find_time_annotations(self, indexes: Sequence[int]) -> dict[str, float]:
        """Time spent (ms, summed) per framework event (and step) in the selected sample range."""
        if len(indexes) == 0:
            print("No selection made")
            return {}
        _, _, events = self._framework_events(indexes)
        spent: dict[str, float] = {}
        for e in events:
            key = e.event_name
            if e.event_args is not None and "step_num" in e.event_args:
                key = f"{key}_{e.event_args['step_num']}"
            spent[key] = spent.get(key, 0.0) + e.duration / 1000.0
        for name, ms in spent.items():
            print(f"Spent {ms} ms (cumulative time) in {name}")
        return spent

    def plot_detailed_profiler_data(self, indexes: Sequence[int]) -> Any:
        """Bars of the data-loader events (by thread or worker) and of the other framework events (by
        phase) in the selected sample range; returns the layout (also `self.detail_layout`)."""
        from bokeh.layouts import column
        from bokeh.models import ColumnDataSource, HoverTool
        from bokeh.plotting import figure

        if len(indexes) == 0:
            print("No selection made")
            return None
        _, _, events = self._framework_events(indexes)
        loaders: dict[str, list[Any]] = {"top": [], "bottom": [], "left": [], "right": [], "metric": []}
        phases: dict[str, list[Any]] = {"top": [], "bottom": [], "left": [], "right": [], "metric": []}
        lanes: dict[Any, int] = {}
        rows: dict[str, int] = {}
        for e in events[:5000]:
            args = e.event_args or {}
            if "bytes_fetched" in args or "worker_id" in args:
                lane = lanes.setdefault(args.get("worker_id", e.tid), len(lanes))
                data, y = loaders, lane
            else:
                data, y = phases, rows.setdefault(e.event_phase, len(rows))
            data["top"].append(y + 1)
            data["bottom"].append(y)
            data["left"].append((e.start_time / 1e6 - self.start) * 1000)
            data["right"].append((e.end_time / 1e6 - self.start) * 1000)
            data["metric"].append(f"{e.event_phase}/{e.event_name}")
        figures = []
        for data, colour, label, lanes_of in ((loaders, "black", "Data loader thread or worker", lanes),
                                              (phases, "blue", "Phase", rows)):
            p = figure(height=250, width=1000, tools=TOOLS)
            p.yaxis.ticker = [i + 0.5 for i in range(len(lanes_of))]
            p.yaxis.major_label_overrides = {i + 0.5: str(name) for name, i in lanes_of.items()}
            p.quad(top="top", bottom="bottom", left="left", right="right", source=ColumnDataSource(data=data),
                   fill_color=colour, fill_alpha=0.3, line_color=None)
            p.add_tools(HoverTool(tooltips=[("metric", "@metric"), ("time (ms)", "$x{0.000}")]))
            p.xaxis.axis_label = "Time since the first sample in ms"
            p.yaxis.axis_label = label
            figures.append(p)
        self.detail_sources = {"dataloaders": loaders, "framework_events": phases, "phases": rows}
        self.detail_layout = column(figures)
        from bokeh.io import show

        from sdlocal.evaluator.analysis.charts._base import in_notebook

        if in_notebook():
            self.target = show(self.detail_layout, notebook_handle=True)
        return self.detail_layout

    def update_data(self, current_timestamp: int) -> None:
        """Add the samples after the last update up to `current_timestamp` (µs) and move the view."""
        events = self.system_metrics_reader.get_events(self.last_timestamp_system_metrics + 1, current_timestamp)
        print(f"Found {len(events)} new system metrics events from timestamp_in_us:"
              f"{self.last_timestamp_system_metrics} to timestamp_in_us:{current_timestamp}")
        self.last_timestamp_system_metrics = current_timestamp
        if not events:
            return
        self._series.add(events)
        self.system_metrics = self._series.arrays()
        for dim, event in self._panels():
            if event in self.sources.get(dim, {}):
                values = self.system_metrics[dim][event]
                self.sources[dim][event].data = {"x": values[:, 0] - self.start, "y": values[:, 1]}
        xs = next(iter(next(iter(self.sources.values())).values())).data["x"]
        if self.figures and len(xs):
            self.figures[0].x_range.start = float(xs[-min(len(xs), 1000)])
            self.figures[0].x_range.end = float(xs[-1])
        self.push()


class StepTimelineChart(Chart):
    def __init__(self, metrics_reader: Any = None, width: int = 1000) -> None:
        bokeh()
        if metrics_reader is None:
            raise ValueError("StepTimelineChart needs a framework metrics reader")
        self.metrics_reader = metrics_reader
        self.last_timestamp = metrics_reader.get_timestamp_of_latest_available_file()
        self.steps: list[list[float]] = []
        self.metric_names: list[str] = []
        self._add(metrics_reader.get_events(0, self.last_timestamp))
        if len(self.steps) < 2:
            raise ValueError(f"fewer than two step events at {metrics_reader!r}: nothing to draw yet")
        self.width = width
        self.start = min(s[0] for s in self.steps)
        self.create_plot()

    def _add(self, events: Sequence[Any]) -> None:
        for e in events:
            if e.event_name.startswith("Step"):
                self.metric_names.append(e.event_name)
                self.steps.append([e.start_time / 1e6, e.duration / 1e6, int((e.event_args or {}).get("step_num", -1))])

    def _data(self) -> dict[str, Any]:
        order = np.argsort([s[0] for s in self.steps], kind="stable")
        steps = np.asarray(self.steps, dtype=float)[order]
        self.steps_np = steps
        return {"x": steps[:, 0] - self.start, "y": steps[:, 1], "step": steps[:, 2],
                "metric": [self.metric_names[i] for i in order.tolist()]}

    def create_plot(self) -> None:
        from bokeh.models import ColumnDataSource, HoverTool
        from bokeh.plotting import figure

        data = self._data()
        first = max(0, len(data["x"]) - self.width)
        self.plot = figure(height=250, width=1000, tools="crosshair,pan,reset,save,wheel_zoom",
                           x_range=(float(data["x"][first]), float(data["x"][-1])))
        self.source = ColumnDataSource(data=data)
        self.plot.line("x", "y", source=self.source, line_color="blue")
        self.plot.add_tools(HoverTool(tooltips=[("index", "$index"), ("step", "@step"), ("metric", "@metric"),
                                                ("(x,y)", "($x, $y)")]))
        self.plot.xaxis.axis_label = "Time since the first step in s"
        self.plot.yaxis.axis_label = "Step duration in s"
        self.plot.xgrid.visible = self.plot.ygrid.visible = False
        self.layout = self.plot
        self.show()

    def update_data(self, current_timestamp: int) -> None:
        previous = self.last_timestamp
        events = self.metrics_reader.get_events(previous + 1, current_timestamp)
        self.last_timestamp = current_timestamp
        self._add([e for e in events if e.start_time > previous])
        data = self._data()
        self.source.data = data
        self.plot.x_range.start = float(data["x"][max(0, len(data["x"]) - self.width)])
        self.plot.x_range.end = float(data["x"][-1])
        self.push()
