"""smdebug.profiler.analysis.notebook_utils.heatmap: Heatmap on bokeh 3 (evaluator/analysis/charts/heatmap.py)."""
from __future__ import annotations

from sdlocal.evaluator.analysis.charts.heatmap import Heatmap

__all__ = ["Heatmap"]
