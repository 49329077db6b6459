"""Numbers the profiler rules share: quantile summaries, trailing-window quantiles, histograms."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def summary(values: np.ndarray | Sequence[float]) -> dict[str, float]:
    """p50/p95/p99/min/max (OverallSystemUsage's figures); {} for no values."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return {}
    p50, p95, p99 = np.quantile(v, [0.5, 0.95, 0.99])
    return {"p50": rounded(p50), "p95": rounded(p95), "p99": rounded(p99), "min": rounded(v.min()),
            "max": rounded(v.max())}


def box(values: np.ndarray | Sequence[float]) -> dict[str, float]:
    """A box plot's figures: quartiles, p95, and whiskers at 1.5 IQR clipped to the data (the
    figures SageMaker's profiler rules report for their box plots); {} for no values."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return {}
    p25, p50, p75, p95 = np.quantile(v, [0.25, 0.5, 0.75, 0.95])
    iqr = p75 - p25
    return {"p25": rounded(p25), "p50": rounded(p50), "p75": rounded(p75), "p95": rounded(p95),
            "upper": rounded(min(p75 + 1.5 * iqr, v.max())), "lower": rounded(max(p25 - 1.5 * iqr, v.min())),
            "max": rounded(v.max()), "min": rounded(v.min())}


def trailing_quantiles(values: np.ndarray, ends: np.ndarray, window: int, qs: Sequence[float]) -> np.ndarray:
    """For each end index e (exclusive): the quantiles `qs` of values[max(0, e - window):e].
    Returns an array of shape (len(ends), len(qs)); NaN rows where e == 0."""
    ends = np.asarray(ends, dtype=np.int64)
    out = np.full((ends.size, len(qs)), np.nan)
    if ends.size == 0:
        return out
    full = ends >= window
    if full.any() and values.size >= window:
        views = sliding_window_view(values, window)[ends[full] - window]
        out[full] = np.quantile(views, qs, axis=1).T
    for i in np.flatnonzero(~full & (ends > 0)):
        out[i] = np.quantile(values[: ends[i]], qs)
    return out


def histogram(values: np.ndarray | Sequence[float], bins: int = 100) -> dict[str, list[float]]:
    """{"probs": counts, "binedges": edges} (SageMaker's names), {} for no values."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return {}
    counts, edges = np.histogram(v, bins=bins)
    return {"probs": counts.tolist(), "binedges": edges.tolist()}


def rounded(value: float | np.floating, digits: int = 4) -> float:
    return float(round(float(value), digits))
