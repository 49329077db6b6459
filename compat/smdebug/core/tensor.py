"""smdebug.core.tensor: a trial's Tensor and the StepState `Trial.has_passed_step` answers."""
from __future__ import annotations

from sdlocal.trial.steps import StepState
from sdlocal.trial.tensor import Tensor

__all__ = ["StepState", "Tensor"]
