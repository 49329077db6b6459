"""Zero-code XGBoost (used by `python -m sdlocal.hook.run`): `xgboost.train` gets the XGBoost hook as a
callback when the script passes none.

`xgboost` is not imported here: when the script imports it, a meta-path finder patches the module
right after it loads (hook/_on_import.py; a PyTorch job pays nothing). The patched `train` (also the name the sklearn
wrappers call) adds one zero-code hook, shared by every call (steps continue), and gives it what
the call shows: the params as hyperparameters, `dtrain` as the SHAP data, the first evaluation
set that is not `dtrain` as the validation data (predictions, labels). A script that passes its
own hook (any hook.xgboost.Hook, smdebug.xgboost.Hook included) trains with that one only.
"""
from __future__ import annotations

import functools
import inspect
from types import ModuleType
from typing import Any

from sdlocal.hook import _tensorboard
from sdlocal.hook._on_import import OnImport
from sdlocal.hook.config import HookConfig


class XGBoostAttach:
    """Patches xgboost's train (now or when imported); `close()` closes the zero-code hook."""

    def __init__(self, config: HookConfig) -> None:
        self.config = config
        self.hook: Any = None
        self._on_import = OnImport("xgboost", self._patch)

    def install(self) -> None:
        self._on_import.install()

    def _patch(self, xgb: ModuleType) -> None:
        from sdlocal.hook import xgboost as engine

        original = xgb.training.train
        signature = inspect.signature(original)

        @functools.wraps(original)
        def train(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            callbacks = list(bound.arguments.get("callbacks") or [])
            if not any(isinstance(c, engine.Hook) for c in callbacks):
                hook = self._hook_for(engine, bound.arguments)
                if hook is not None:
                    bound.arguments["callbacks"] = [*callbacks, hook]
            return original(*bound.args, **bound.kwargs)

        setattr(xgb, "train", train)  # noqa: B010 - a module's attribute, patched
        setattr(xgb.training, "train", train)  # noqa: B010
        if hasattr(xgb, "sklearn") and getattr(xgb.sklearn, "train", None) is original:
            xgb.sklearn.train = train

    def _hook_for(self, engine: Any, arguments: dict[str, Any]) -> Any:
        if self.hook is None:
            self.hook = engine.Hook(self.config, auto=True,
                                    tensorboard_dir=_tensorboard.job_dir(self.config.tensorboard_dir))
        hook = self.hook
        if hook.closed:
            return None  # the script's own hook took over
        dtrain = arguments.get("dtrain")
        if hook.hyperparameters is None and isinstance(arguments.get("params"), dict):
            hook.hyperparameters = dict(arguments["params"])
        if hook.train_data is None:
            hook.train_data = dtrain
        if hook.validation_data is None:
            for dmatrix, _name in arguments.get("evals") or ():
                if dmatrix is not dtrain:
                    hook.validation_data = dmatrix
                    break
        return hook

    def close(self) -> None:
        self._on_import.uninstall()
        if self.hook is not None:
            self.hook.close()
