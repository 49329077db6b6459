"""smdebug.pytorch: the PyTorch hook under smdebug's names (imports torch)."""
from __future__ import annotations

from hook.pytorch import Hook
from smdebug import ReductionConfig, SaveConfig, SaveConfigMode, modes
from smdebug.core.collection import Collection, CollectionKeys
from smdebug.trials import create_trial

__all__ = ["Collection", "CollectionKeys", "Hook", "ReductionConfig", "SaveConfig", "SaveConfigMode",
           "create_trial", "modes"]
