"""smdebug's notebook charts on bokeh 3 (smdebug.profiler.analysis.notebook_utils)."""
from __future__ import annotations

from sdlocal.evaluator.analysis.charts.heatmap import Heatmap
from sdlocal.evaluator.analysis.charts.histograms import MetricsHistogram, StepHistogram
from sdlocal.evaluator.analysis.charts.timelines import StepTimelineChart, TimelineCharts

__all__ = ["Heatmap", "MetricsHistogram", "StepHistogram", "StepTimelineChart", "TimelineCharts"]
