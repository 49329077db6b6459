"""smdebug.profiler.analysis.notebook_utils.step_timeline_chart: StepTimelineChart on bokeh 3 (evaluator/analysis/charts/timelines.py)."""
from __future__ import annotations

from sdlocal.evaluator.analysis.charts.timelines import StepTimelineChart

__all__ = ["StepTimelineChart"]
