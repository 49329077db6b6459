"""smdebug.profiler.analysis.utils.profiler_data_to_pandas (evaluator/analysis/frames.py)."""
from __future__ import annotations

from sdlocal.evaluator.analysis.frames import PandasFrame

__all__ = ["PandasFrame"]
