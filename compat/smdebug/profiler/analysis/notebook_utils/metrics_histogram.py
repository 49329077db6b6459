"""smdebug.profiler.analysis.notebook_utils.metrics_histogram: MetricsHistogram on bokeh 3 (evaluator/analysis/charts/histograms.py)."""
from __future__ import annotations

from sdlocal.evaluator.analysis.charts.histograms import MetricsHistogram

__all__ = ["MetricsHistogram"]
