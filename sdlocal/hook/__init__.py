"""Training side of sdlocal: a PyTorch hook writing smdebug-format trials.

`Hook` (hook.pytorch) is imported lazily so that `sdlocal.hook.config` works without torch.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sdlocal.hook.config import CollectionConfig, HookConfig, ModeSaveConfig, ReductionConfig, SaveConfig
from sdlocal.hook.errors import HookConfigError, HookError, HookWriteError

if TYPE_CHECKING:
    from sdlocal.hook.pytorch import Hook

__all__ = [
    "CollectionConfig",
    "Hook",
    "HookConfig",
    "HookConfigError",
    "HookError",
    "HookWriteError",
    "ModeSaveConfig",
    "ReductionConfig",
    "SaveConfig",
]


def __getattr__(name: str) -> Any:
    if name == "Hook":
        from sdlocal.hook.pytorch import Hook

        return Hook
    raise AttributeError(name)
