"""smdebug's Heatmap: every CPU core's and GPU's utilization over time, one row each (and a
"total" row per dimension and node, and a node_total), coloured 0-100 % (viridis), on bokeh 3.

    view = Heatmap(system_metrics_reader, plot_height=450)
    view.update_data(system_metrics_reader.get_timestamp_of_latest_available_file())   # live job

Series that are not percentages (bytes/s of the network and disks) are scaled to their maximum,
as smdebug's. x is the sample index. `update_data` exists here: smdebug's profiling dashboard
notebook called it, smdebug's Heatmap had none.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sdlocal.evaluator.analysis.charts._base import Chart, bokeh, matching

SCALED_DIMENSIONS = ("Algorithm", "Platform", "")


class Heatmap(Chart):
    def __init__(self, metrics_reader: Any, select_metrics: Any = (), starttime: int = 0, endtime: int | None = None,
                 select_dimensions: Sequence[str] = (".*CPU", ".*GPU"), select_events: Sequence[str] = (".*",),
                 plot_height: int = 350, show_workers: bool = True) -> None:
        """`select_metrics` is accepted and not used (smdebug's notebooks pass the framework reader there)."""
        bokeh()
        self.metrics_reader = metrics_reader
        self.select_dimensions, self.select_events = list(select_dimensions), list(select_events)
        self.show_workers = show_workers
        self.plot_height = plot_height
        self.start = 0
        self.last_timestamp_system_metrics = (metrics_reader.get_timestamp_of_latest_available_file()
                                              if endtime is None else endtime)
        self.last_timestamp = self.last_timestamp_system_metrics
        self._values: dict[str, dict[str, dict[str, list[float]]]] = {}  # node -> dimension -> series -> values
        self._add(metrics_reader.get_events(starttime, self.last_timestamp_system_metrics))
        self.system_metrics = self.preprocess_system_metrics()
        self.create_plot()

    def _add(self, events: Sequence[Any]) -> None:
        for e in sorted(events, key=lambda e: e.timestamp):
            self._values.setdefault(e.node_id, {}).setdefault(e.dimension, {}).setdefault(e.name, []).append(e.value)

    def preprocess_system_metrics(self) -> dict[str, dict[str, dict[str, np.ndarray]]]:
        """Per node, dimension and series an array of values (scaled to % where not one), a
        "total" per dimension, and "node_total": the mean of the nodes' totals."""
        if not self._values:
            raise ValueError(f"no system metrics at {self.metrics_reader!r}")
        out: dict[str, dict[str, dict[str, np.ndarray]]] = {}
        self.width = min(len(v) for dims in self._values.values() for series in dims.values() for v in series.values())
        for node, dims in self._values.items():
            out[node] = {}
            for dim, series in dims.items():
                arrays = {}
                for name, values in series.items():
                    a = np.asarray(values, dtype=float)
                    if dim in SCALED_DIMENSIONS:
                        top = float(a.max()) if a.size else 0.0
                        a = (a / top if top else a) * 100
                    arrays[name] = a
                n = min(len(a) for a in arrays.values())
                arrays["total"] = np.mean([a[:n] for a in arrays.values()], axis=0)
                out[node][dim] = arrays
        nodes = list(out)
        out["node_total"] = {}
        for dim in out[nodes[0]]:
            totals = [out[n][dim]["total"] for n in nodes if dim in out[n]]
            n = min(len(t) for t in totals)
            out["node_total"][dim] = {"total": np.mean([t[:n] for t in totals], axis=0)}
        self.available_dimensions = sorted({d for dims in out.values() for d in dims})
        self.available_events = sorted({e for dims in out.values() for s in dims.values() for e in s})
        self.filtered_events = matching(self.select_events, self.available_events, ".*{}")
        self.filtered_dimensions = matching(self.select_dimensions, self.available_dimensions)
        return out

    def _rows(self) -> tuple[list[np.ndarray], list[str]]:
        rows, names = [], []
        for node, dims in self.system_metrics.items():
            for dim in sorted(dims):
                if dim not in self.filtered_dimensions:
                    continue
                for event in sorted(dims[dim], key=lambda e: (e == "total", len(e), e)):
                    if event in self.filtered_events:
                        rows.append(dims[dim][event][: self.width])
                        names.append(f"{dim}_{event}_{node}")
        if not rows:
            raise ValueError(f"no system metrics match dimensions {self.select_dimensions} and events "
                             f"{self.select_events} (available: {self.available_dimensions})")
        return rows, names

    def _data(self) -> dict[str, Any]:
        rows, names = self._rows()
        self.metric_names = names
        return {"image": [np.asarray(r, dtype=float).reshape(1, -1) for r in rows], "x": [0] * len(rows),
                "y": list(range(len(rows))), "dw": [self.width] * len(rows), "dh": [1.3] * len(rows),
                "metric": names}

    def create_plot(self) -> None:
        from bokeh.models import ColumnDataSource, FixedTicker, HoverTool, LinearColorMapper
        from bokeh.palettes import viridis
        from bokeh.plotting import figure

        data = self._data()
        ymax = len(data["y"])
        start = self.width - 1000 if self.width > 1000 else 0
        self.plot = figure(height=self.plot_height, width=1000, x_range=(start, self.width), y_range=(0, ymax),
                           tools="crosshair,reset,xwheel_zoom,save")
        self.plot.xaxis.axis_label = "Sample index"
        self.source = ColumnDataSource(data=data)
        mapper = LinearColorMapper(palette=viridis(100), low=0, high=100)
        self.plot.image(image="image", x="x", y="y", dw="dw", dh="dh", color_mapper=mapper, source=self.source)
        self.plot.add_tools(HoverTool(tooltips=[("usage", "@image"), ("metric", "@metric"), ("index", "$x{0}")]))
        self.plot.xgrid.visible = self.plot.ygrid.visible = False
        self.plot.yaxis.ticker = FixedTicker(ticks=list(range(ymax)))
        self.plot.yaxis.major_label_text_font_size = "7pt"
        self.plot.yaxis.major_label_overrides = {i: name for i, name in enumerate(self.metric_names)}
        self.layout = self.plot
        self.show()

    def update_data(self, current_timestamp: int) -> None:
        """Add the samples after the last update up to `current_timestamp` (µs) and redraw."""
        self._add(self.metrics_reader.get_events(self.last_timestamp_system_metrics + 1, current_timestamp))
        self.last_timestamp_system_metrics = self.last_timestamp = current_timestamp
        self.system_metrics = self.preprocess_system_metrics()
        self.source.data = self._data()
        self.plot.x_range.end = self.width
        self.plot.x_range.start = max(0, self.width - 1000)
        self.push()
