"""smdebug.core.modes: the training modes (sdlocal's trial.modes.ModeKeys, same names and values)."""
from __future__ import annotations

from sdlocal.trial.modes import ModeKeys

ALLOWED_MODES = [ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT, ModeKeys.GLOBAL]
ALLOWED_MODE_NAMES = [m.name for m in ALLOWED_MODES]
MODE_STEP_PLUGIN_NAME = "mode_step"
MODE_PLUGIN_NAME = "mode"


def str_to_mode_keys(mode_str: str) -> ModeKeys:
    """"train" / "eval" / "predict" / "global" as a ModeKeys (smdebug's helper)."""
    if mode_str in ("train", "eval", "predict", "global"):
        return ModeKeys[mode_str.upper()]
    raise ValueError(f"Invalid mode {mode_str!r}: expected train, eval, predict or global")


__all__ = ["ALLOWED_MODES", "ALLOWED_MODE_NAMES", "ModeKeys", "str_to_mode_keys"]
