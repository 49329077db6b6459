"""smdebug.core.save_config: when a hook saves (SaveConfig, per mode SaveConfigMode)."""
from __future__ import annotations

from trial.collection import SaveConfigMode

SaveConfig = SaveConfigMode  # placeholder until the hook's smdebug-compatible SaveConfig lands

__all__ = ["SaveConfig", "SaveConfigMode"]
