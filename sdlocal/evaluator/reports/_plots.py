"""Plots for report pages, drawn with matplotlib and embedded as inline SVG (no script, no file).

matplotlib is imported on first use: listing or loading rules never pays for it. Figures are
`matplotlib.figure.Figure` objects (no pyplot: no global figure registry, nothing shown), drawn
headless with the SVG backend.

Size: a series longer than `MAX_POINTS` is reduced to the minimum and maximum of each of
`MAX_POINTS / 2` buckets (peaks survive, unlike a mean or a stride), and an artist that still has
more than `RASTER_ABOVE` points (scatter of many steps, a heatmap) is embedded as a PNG inside the
SVG, so a day-long job makes a report of the same size as an hour-long one.
"""
from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sdlocal.evaluator.reports._page import Html, figure

MAX_POINTS = 1600  # per line; the page is about 1,100 px wide
RASTER_ABOVE = 3000  # points (markers) of one artist above which it is embedded as a PNG
RASTER_DPI = 144
WIDTH_IN = 10.0

# Colour-blind safe (Okabe-Ito), then matplotlib's tab10 for longer lists.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000",
           "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
HIGHLIGHT = "#D62728"  # outliers, thresholds

_RC: dict[str, Any] = {
    "font.size": 8.5,
    "font.family": "DejaVu Sans",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#e5e5e5",
    "grid.linewidth": 0.6,
    "axes.edgecolor": "#888888",
    "axes.titlesize": 9.5,
    "axes.titleweight": "bold",
    "axes.titlelocation": "left",
    "legend.frameon": False,
    "legend.fontsize": 8,
    "svg.fonttype": "none",  # text stays text: smaller, selectable, searchable
    "svg.hashsalt": "sdlocal",  # ids do not depend on a random salt: same data, same bytes
}


@dataclass(frozen=True, eq=False)
class Line:
    """One series of a chart. kind: "line", "points" (markers only) or "steps" (a staircase)."""

    x: Any
    y: Any
    label: str = ""
    color: str | None = None
    kind: str = "line"
    width: float = 1.1
    size: float = 3.0  # marker size for "points"


@dataclass(frozen=True)
class Mark:
    """A horizontal or vertical reference line (a threshold, a mean): axis "y" or "x"."""

    value: float
    label: str = ""
    axis: str = "y"
    color: str = HIGHLIGHT
    style: str = "--"


def envelope(x: Any, y: Any, max_points: int = MAX_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """x and y reduced to at most about `max_points` points: the min and the max of each bucket of
    consecutive samples, in x order. Short series come back unchanged."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n = x.size
    if n <= max_points:
        return x, y
    buckets = max(1, max_points // 2)
    edges = np.linspace(0, n, buckets + 1).astype(np.int64)
    xs: list[float] = []
    ys: list[float] = []
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        if hi <= lo:
            continue
        seg = y[lo:hi]
        if np.all(np.isnan(seg)):
            xs.append(float(x[lo]))
            ys.append(float("nan"))
            continue
        i, j = lo + int(np.nanargmin(seg)), lo + int(np.nanargmax(seg))
        for k in sorted({i, j}):
            xs.append(float(x[k]))
            ys.append(float(y[k]))
    return np.asarray(xs), np.asarray(ys)


def line_points(x: Any, y: Any, max_points: int = MAX_POINTS, gap_factor: float = 5.0
                ) -> tuple[np.ndarray, np.ndarray]:
    """The points a line is drawn through: split where x jumps by more than `gap_factor` times its
    median step (a paused sampler, missing files: the line breaks there, NaN, instead of bridging
    the gap), each part reduced by `envelope` in proportion to its length."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.size < 3:
        return x, y
    steps = np.diff(x)
    positive = steps[steps > 0]
    if not positive.size:
        return envelope(x, y, max_points)
    cuts = (np.flatnonzero(steps > gap_factor * float(np.median(positive))) + 1).tolist()
    if not cuts:
        return envelope(x, y, max_points)
    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    for lo, hi in zip([0, *cuts], [*cuts, x.size], strict=True):
        px, py = envelope(x[lo:hi], y[lo:hi], max(2, max_points * (hi - lo) // x.size))
        xs += [px, np.array([np.nan])]
        ys += [py, np.array([np.nan])]
    return np.concatenate(xs[:-1]), np.concatenate(ys[:-1])


# Fixed margins (inches) rather than a layout engine: every chart of a page then has its plot
# area at the same place and width, so charts over the same time range line up one under another.
LEFT_IN, RIGHT_IN, BOTTOM_IN, TOP_IN = 0.8, 0.25, 0.5, 0.3
LEGEND_ROW_IN = 0.17


def _new_figure(height_in: float, *, legend_rows: int = 0, left_in: float = LEFT_IN) -> tuple[Any, Any]:
    """A figure with one plot area; `legend_rows` rows of legend go above it, right-aligned."""
    from matplotlib.figure import Figure

    height_in += LEGEND_ROW_IN * max(0, legend_rows - 1)
    fig = Figure(figsize=(WIDTH_IN, height_in), dpi=100)
    top = TOP_IN + LEGEND_ROW_IN * max(0, legend_rows - 1)
    fig.subplots_adjust(left=left_in / WIDTH_IN, right=1 - RIGHT_IN / WIDTH_IN, bottom=BOTTOM_IN / height_in,
                        top=1 - top / height_in)
    return fig, fig.add_subplot(1, 1, 1)


def _legend(ax: Any, entries: int, columns: int) -> None:
    """Above the plot area on the right, on the title's line (titles are on the left)."""
    if entries:
        ax.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), ncols=min(entries, columns), markerscale=2.0,
                  borderaxespad=0.2, handlelength=1.6, columnspacing=1.2)


def _legend_rows(entries: int, columns: int) -> int:
    return -(-entries // columns) if entries else 0


def _to_svg(fig: Any, title: str) -> Html:
    """The figure as an <svg> element for inline use: no XML prolog, no fixed size (CSS scales it),
    ids made unique in the page, a role and a label for screen readers."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", dpi=RASTER_DPI, metadata={"Date": None, "Creator": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    # Path coordinates to 0.1 pt (matplotlib writes 6 decimals): a third of the bytes, no visible change.
    svg = _PATH_DATA.sub(lambda m: 'd="' + _NUMBER.sub(_round, m.group(1)).replace("\n", " ") + '"', svg)
    # A prefix from the figure's own content: the same page renders to the same bytes every time.
    n = hashlib.sha1(svg.encode()).hexdigest()[:8]
    # matplotlib's ids (clip paths, markers, images) are unique within one SVG only.
    svg = re.sub(r'\bid="([^"]+)"', rf'id="f{n}-\1"', svg)
    svg = re.sub(r'(xlink:href|href)="#([^"]+)"', rf'\1="#f{n}-\2"', svg)
    svg = re.sub(r"url\(#([^)]+)\)", rf"url(#f{n}-\1)", svg)
    svg = re.sub(r'<svg([^>]*?) width="[^"]*" height="[^"]*"', r"<svg\1", svg, count=1)
    label = title.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
    svg = svg.replace("<svg", f'<svg role="img" aria-label="{label}"', 1)
    fig.clear()
    return Html(svg)


_PATH_DATA = re.compile(r'\bd="([^"]*)"')
_NUMBER = re.compile(r"-?\d+\.\d+")


def _round(m: re.Match[str]) -> str:
    text = f"{float(m.group()):.1f}"
    return text[:-2] if text.endswith(".0") else text


def _draw(fig_factory: Any, title: str, caption: str | None) -> Html:
    from matplotlib import rc_context

    with rc_context(_RC):  # type: ignore[arg-type]
        fig = fig_factory()
        return figure(_to_svg(fig, title), caption)


def _apply_marks(ax: Any, marks: Sequence[Mark]) -> None:
    for m in marks:
        if m.axis == "x":
            ax.axvline(m.value, color=m.color, linestyle=m.style, linewidth=1, label=m.label or None)
        else:
            ax.axhline(m.value, color=m.color, linestyle=m.style, linewidth=1, label=m.label or None)


def _plot_line(ax: Any, line: Line, color: str) -> None:
    x = np.asarray(line.x, dtype=np.float64)
    y = np.asarray(line.y, dtype=np.float64)
    if line.kind == "points" or x.size == 1:  # a single sample would draw no line at all
        artists = ax.plot(x, y, linestyle="none", marker="o", markersize=line.size, markeredgewidth=0,
                          color=color, label=line.label or None, alpha=0.85)
        if x.size > RASTER_ABOVE:
            for a in artists:
                a.set_rasterized(True)
        return
    x, y = line_points(x, y)
    drawstyle = "steps-post" if line.kind == "steps" else "default"
    ax.plot(x, y, color=color, linewidth=line.width, label=line.label or None, drawstyle=drawstyle)


LEGEND_COLUMNS = 6


def line_chart(lines: Sequence[Line], *, title: str, xlabel: str, ylabel: str,
               xlim: tuple[float | None, float | None] | None = None,
               ylim: tuple[float | None, float | None] | None = None, marks: Sequence[Mark] = (),
               caption: str | None = None, height_in: float = 2.6, legend: bool = True,
               logy: bool = False) -> Html:
    """Lines and/or point series over one x axis (time, step, iteration)."""
    entries = (sum(1 for line in lines if line.label) + sum(1 for m in marks if m.label)) if legend else 0

    def make() -> Any:
        fig, ax = _new_figure(height_in, legend_rows=_legend_rows(entries, LEGEND_COLUMNS))
        for i, line in enumerate(lines):
            _plot_line(ax, line, line.color or PALETTE[i % len(PALETTE)])
        _apply_marks(ax, marks)
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        if logy:
            ax.set_yscale("log")
        ax.margins(x=0.01)
        if xlim is not None:
            ax.set_xlim(*xlim)
        if ylim is not None:
            ax.set_ylim(*ylim)
        _legend(ax, entries, LEGEND_COLUMNS)
        return fig

    return _draw(make, title, caption)


def heatmap(matrix: Any, *, title: str, row_labels: Sequence[str], xlabel: str,
            x_extent: tuple[float, float] | None = None, xlim: tuple[float | None, float | None] | None = None,
            col_labels: Sequence[str] | None = None, ylabel: str = "", colorbar_label: str = "",
            vmin: float | None = None, vmax: float | None = None, annotate: bool = False,
            cmap: str = "viridis", caption: str | None = None, height_in: float | None = None) -> Html:
    """Rows (cores, classes) by columns (time buckets, classes). With `x_extent` the columns span
    that x range (time); with `col_labels` they are categories. `annotate` writes each value. The
    colour bar sits above the plot on the right, so the plot area lines up with the line charts."""
    data = np.asarray(matrix, dtype=np.float64)
    rows = data.shape[0]
    height = height_in or min(6.0, 1.1 + 0.2 * rows)
    longest = max((len(label) for label in row_labels), default=0)
    left = max(LEFT_IN, 0.25 + 0.068 * longest + (0.2 if ylabel else 0))

    def make() -> Any:
        fig, ax = _new_figure(height, left_in=left)
        ax.grid(False)
        extent = None
        if x_extent is not None:
            extent = (x_extent[0], x_extent[1], rows - 0.5, -0.5)
        im = ax.imshow(data, aspect="auto", interpolation="nearest", cmap=cmap, vmin=vmin, vmax=vmax,
                       extent=extent)
        step = max(1, -(-rows // 16))  # at most 16 row labels
        ax.set_yticks(range(0, rows, step), [row_labels[i] for i in range(0, rows, step)])
        if col_labels is not None:
            ax.set_xticks(range(len(col_labels)), list(col_labels), rotation=30 if len(col_labels) > 6 else 0)
        if xlim is not None:
            ax.set_xlim(*xlim)
        if annotate and data.size <= 400:
            for (r, c), v in np.ndenumerate(data):
                if np.isfinite(v):
                    red, green, blue, _ = im.cmap(im.norm(v))
                    dark = 0.299 * red + 0.587 * green + 0.114 * blue < 0.5  # the cell's colour, not its value
                    ax.text(c, r, f"{v:g}", ha="center", va="center", fontsize=8,
                            color="white" if dark else "black")
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        if ylabel:
            ax.set_ylabel(ylabel)
        # A slim colour bar above the plot on the right (the legend's place in line charts), its
        # range written at its ends: tick labels under it would run into the first row.
        pos = ax.get_position()
        cax = fig.add_axes((pos.x1 - 0.26, pos.y1 + 0.07 / height, 0.2, 0.07 / height))
        fig.colorbar(im, cax=cax, orientation="horizontal")
        cax.set_xticks([])
        lo, hi = im.get_clim()
        cax.text(-0.02, 0.5, f"{colorbar_label} {lo:g}".strip(), transform=cax.transAxes, ha="right",
                 va="center", fontsize=7.5)
        cax.text(1.02, 0.5, f"{hi:g}", transform=cax.transAxes, ha="left", va="center", fontsize=7.5)
        return fig

    return _draw(make, title, caption)


def histogram(groups: Sequence[tuple[str, Any]], *, title: str, xlabel: str, ylabel: str = "count",
              bins: int = 50, marks: Sequence[Mark] = (), caption: str | None = None,
              height_in: float = 2.6, logy: bool = False) -> Html:
    """One histogram per (label, values) group, on shared bins."""
    arrays = [np.asarray(v, dtype=np.float64) for _, v in groups]
    finite = [a[np.isfinite(a)] for a in arrays]
    allv = np.concatenate(finite) if finite else np.empty(0)
    lo, hi = (float(allv.min()), float(allv.max())) if allv.size else (0.0, 1.0)
    if hi <= lo:
        lo, hi = lo - 0.5, hi + 0.5
    edges = np.linspace(lo, hi, bins + 1)
    entries = sum(1 for label, _ in groups if label) + sum(1 for m in marks if m.label)

    def make() -> Any:
        fig, ax = _new_figure(height_in, legend_rows=_legend_rows(entries, LEGEND_COLUMNS))
        for i, ((label, _), values) in enumerate(zip(groups, finite, strict=True)):
            ax.hist(values, bins=edges, color=PALETTE[i % len(PALETTE)], alpha=0.75 if len(groups) > 1 else 0.9,
                    label=label or None, histtype="stepfilled", edgecolor="white", linewidth=0.3)
        _apply_marks(ax, marks)
        if logy:
            ax.set_yscale("log")
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        _legend(ax, entries, LEGEND_COLUMNS)
        return fig

    return _draw(make, title, caption)


def bar_chart(labels: Sequence[str], values: Any, *, title: str, xlabel: str, caption: str | None = None,
              color: str = PALETTE[0], max_bars: int = 30) -> Html:
    """Horizontal bars, largest first (feature importance, time per phase)."""
    vals = np.asarray(values, dtype=np.float64)
    order = np.argsort(-vals, kind="stable")[:max_bars]
    names = [labels[i] for i in order][::-1]
    shown = vals[order][::-1]
    longest = max((len(n) for n in names), default=0)

    def make() -> Any:
        fig, ax = _new_figure(min(8.0, 1.0 + 0.22 * len(names)), left_in=max(LEFT_IN, 0.25 + 0.068 * longest))
        ax.barh(range(len(names)), shown, color=color)
        ax.set_yticks(range(len(names)), names)
        ax.grid(axis="y", visible=False)
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        return fig

    return _draw(make, title, caption)
