"""smdebug.profiler.analysis.utils.merge_timelines (evaluator/analysis/merge.py)."""
from __future__ import annotations

from sdlocal.evaluator.analysis.merge import MergedTimeline, MergeUnit

__all__ = ["MergeUnit", "MergedTimeline"]
