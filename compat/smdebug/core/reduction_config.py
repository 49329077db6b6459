"""smdebug.core.reduction_config: which reductions a hook saves instead of (or beside) raw tensors."""
from __future__ import annotations

from trial.collection import ReductionConfig

__all__ = ["ReductionConfig"]
