"""smdebug.profiler.analysis.notebook_utils.training_job (evaluator/analysis/training_job.py)."""
from __future__ import annotations

from sdlocal.evaluator.analysis.training_job import TrainingJob

__all__ = ["TrainingJob"]
