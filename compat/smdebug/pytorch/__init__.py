"""smdebug.pytorch: smdebug 1.0's PyTorch API (imports torch): `Hook` (smdebug.pytorch.hook),
`get_hook` / `set_hook` / `del_hook`, `Collection`, `CollectionKeys`, `SaveConfig`,
`SaveConfigMode`, `ReductionConfig`, `modes`, `create_trial`."""
from __future__ import annotations

from smdebug import ReductionConfig, SaveConfig, SaveConfigMode, modes
from smdebug.core.collection import CollectionKeys
from smdebug.pytorch.collection import Collection
from smdebug.pytorch.hook import Hook
from smdebug.pytorch.singleton_utils import del_hook, get_hook, set_hook
from smdebug.trials import create_trial

__all__ = ["Collection", "CollectionKeys", "Hook", "ReductionConfig", "SaveConfig", "SaveConfigMode",
           "create_trial", "del_hook", "get_hook", "modes", "set_hook"]
