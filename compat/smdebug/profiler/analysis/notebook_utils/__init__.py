"""smdebug.profiler.analysis.notebook_utils: TrainingJob and the bokeh 3 charts of the profiling
notebooks (evaluator/analysis/training_job.py, evaluator/analysis/charts/). The charts need the
`analysis` extra (bokeh); TrainingJob does not."""
from __future__ import annotations

from typing import Any

from sdlocal.evaluator.analysis.training_job import TrainingJob

_CHARTS = {"MetricsHistogram": "histograms", "StepHistogram": "histograms", "StepTimelineChart": "timelines",
           "TimelineCharts": "timelines", "Heatmap": "heatmap"}


def __getattr__(name: str) -> Any:  # the charts load bokeh: only when asked for
    if name in _CHARTS:
        import importlib

        return getattr(importlib.import_module(f"sdlocal.evaluator.analysis.charts.{_CHARTS[name]}"), name)
    raise AttributeError(name)


__all__ = ["Heatmap", "MetricsHistogram", "StepHistogram", "StepTimelineChart", "TimelineCharts", "TrainingJob"]
