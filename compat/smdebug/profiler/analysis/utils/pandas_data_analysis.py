"""smdebug.profiler.analysis.utils.pandas_data_analysis (evaluator/analysis/stats.py)."""
from __future__ import annotations

from sdlocal.evaluator.analysis.stats import JobStats, PandasFrameAnalysis, Resource, StatsBy

__all__ = ["JobStats", "PandasFrameAnalysis", "Resource", "StatsBy"]
