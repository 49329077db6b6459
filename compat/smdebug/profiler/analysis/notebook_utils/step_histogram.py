"""smdebug.profiler.analysis.notebook_utils.step_histogram: StepHistogram on bokeh 3 (evaluator/analysis/charts/histograms.py)."""
from __future__ import annotations

from sdlocal.evaluator.analysis.charts.histograms import StepHistogram

__all__ = ["StepHistogram"]
