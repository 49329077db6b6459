"""smdebug.profiler.analysis.notebook_utils.timeline_charts: TimelineCharts on bokeh 3 (evaluator/analysis/charts/timelines.py)."""
from __future__ import annotations

from sdlocal.evaluator.analysis.charts.timelines import TimelineCharts

__all__ = ["TimelineCharts"]
