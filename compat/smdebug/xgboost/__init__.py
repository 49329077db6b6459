"""smdebug.xgboost: smdebug 1.0's XGBoost API (imports xgboost): `Hook` (a training callback,
`xgboost.train(..., callbacks=[hook])`), `get_hook` / `set_hook` / `del_hook`, `SaveConfig`,
`SaveConfigMode`, `ReductionConfig`, `CollectionKeys`, `modes`."""
from __future__ import annotations

from smdebug import ReductionConfig, SaveConfig, SaveConfigMode, modes
from smdebug.core.collection import CollectionKeys
from smdebug.xgboost.hook import Hook, del_hook, get_hook, set_hook

__all__ = ["CollectionKeys", "Hook", "ReductionConfig", "SaveConfig", "SaveConfigMode", "del_hook", "get_hook",
           "modes", "set_hook"]
