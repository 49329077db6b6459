"""What every notebook chart shares: bokeh 3 (the `analysis` extra), showing in a notebook,
saving a standalone HTML page, and smdebug's grouping of system samples.

Resources: BokehJS is inlined (bokeh.resources.INLINE), in the notebook and in saved pages, so
that a chart draws on a machine without internet (bokeh's default loads it from a CDN).
Outside a notebook, building a chart shows nothing (smdebug's opened a browser tab):
`chart.save("chart.html")` writes the page, `chart.layout` is the bokeh model.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sdlocal.evaluator.analysis._deps import require

_NOTEBOOK_READY = [False]


def bokeh() -> Any:
    """The bokeh package (MissingExtra naming the extra when it is not installed)."""
    require("bokeh.plotting")
    require("bokeh.models")
    return require("bokeh")


def in_notebook() -> bool:
    """True inside a Jupyter kernel (IPython with a kernel attached)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def matching(patterns: Iterable[str], names: Iterable[str], wrap: str = "{}") -> list[str]:
    """The names that any pattern (formatted into `wrap`) finds with re.search, sorted."""
    compiled = [re.compile(wrap.format(p)) for p in patterns]
    return sorted({n for n in names if any(c.search(n) for c in compiled)})


class Chart:
    """A built bokeh layout (`self.layout`), shown in a notebook at once and savable as a page."""

    layout: Any = None
    target: Any = None  # the notebook handle (smdebug's name), None outside a notebook

    def show(self) -> Any:
        """Show the chart in the notebook (and return the handle that updates go to)."""
        if not in_notebook():
            return None
        from bokeh.io import output_notebook, show
        from bokeh.resources import INLINE

        if not _NOTEBOOK_READY[0]:
            output_notebook(resources=INLINE, hide_banner=True)
            _NOTEBOOK_READY[0] = True
        self.target = show(self.layout, notebook_handle=True)
        return self.target

    def push(self) -> None:
        """Send changed data to the chart shown in the notebook."""
        if self.target is not None:
            from bokeh.io import push_notebook

            push_notebook(handle=self.target)

    def save(self, filename: str | Path, title: str | None = None) -> Path:
        """Write the chart as a standalone HTML page with BokehJS inlined; returns its path."""
        from bokeh.embed import file_html
        from bokeh.resources import INLINE

        path = Path(filename)
        path.write_text(file_html(self.layout, INLINE, title or type(self).__name__), encoding="utf-8")
        return path

    def _repr_html_(self) -> str:
        """A chart left as a cell's last value draws there too."""
        from bokeh.embed import file_html
        from bokeh.resources import INLINE

        return str(file_html(self.layout, INLINE, type(self).__name__))


class SystemSeries:
    """smdebug's grouping of system events for its charts: {dimension id: {series name: samples}}
    with a "total" per dimension (the mean over its series, sample by sample). The dimension id
    is "<dimension>-nodeid:<node>" with show_workers, else the dimension."""

    def __init__(self, show_workers: bool) -> None:
        self.show_workers = show_workers
        self.samples: dict[str, dict[str, list[tuple[float, float]]]] = {}

    def add(self, events: Iterable[Any]) -> None:
        for e in events:
            dim = f"{e.dimension}-nodeid:{e.node_id}" if self.show_workers else e.dimension
            self.samples.setdefault(dim, {}).setdefault(e.name, []).append((e.timestamp, e.value))

    def arrays(self) -> dict[str, dict[str, np.ndarray]]:
        """Per dimension id: per series name an (n, 2) array [timestamp s, value] sorted by time,
        and "total": the element-wise mean of the series (cut to the shortest)."""
        out: dict[str, dict[str, np.ndarray]] = {}
        for dim, series in self.samples.items():
            arrays = {name: np.array(sorted(vals), dtype=float).reshape(-1, 2) for name, vals in series.items()}
            n = min(len(a) for a in arrays.values())
            arrays["total"] = np.mean([a[:n] for a in arrays.values()], axis=0) if n else np.empty((0, 2))
            out[dim] = arrays
        return out

    def events(self) -> list[str]:
        return sorted({name for series in self.samples.values() for name in series} | {"total"})


def histogram(values: Sequence[float] | np.ndarray, percent: bool) -> tuple[np.ndarray, np.ndarray]:
    """(counts, bin edges): smdebug's 2-point bins for percentages, up to 100 included (smdebug's
    stopped at 98: a busy core's 98-100 % samples were not counted); 50 bins over the values' range
    for other units (bytes/s: smdebug's percent bins showed nothing)."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if percent:
        return np.histogram(v, bins=np.arange(0, 102, 2))
    lo, hi = (float(v.min()), float(v.max())) if v.size else (0.0, 1.0)
    return np.histogram(v, bins=np.linspace(lo, hi if hi > lo else lo + 1.0, 51))


def is_percent(dimension: str) -> bool:
    return "Utilization" in dimension or "Percent" in dimension or "Memory" in dimension
