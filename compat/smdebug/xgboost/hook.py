"""smdebug.xgboost.hook: smdebug 1.0's XGBoost `Hook`, a subclass of sdlocal's (hook.xgboost.Hook).

What users get is smdebug's constructor (out_dir, export_tensorboard, tensorboard_dir, dry_run,
reduction_config (ignored, as smdebug), save_config, include_regex, include_collections (default:
metrics), save_all, include_workers, hyperparameters, train_data, validation_data),
`create_from_json_file()`, and the attributes scripts set after creating it from the job's config
(`hook.hyperparameters = params; hook.train_data = dtrain; hook.validation_data = dval`).
`out_dir` as the PyTorch hook's (hook/_job_paths.py): `None` or SageMaker's `/opt/ml/output/tensors`
in a job mean the job's tensors folder, other `/opt/ml` paths (a `tensorboard_dir` too) the job's
same folder; `s3://` is refused, a folder holding a finished trial too (as smdebug).
"""
from __future__ import annotations

import errno
import logging
import os
from pathlib import Path
from typing import Any

from sdlocal.hook import _current, _tensorboard
from sdlocal.hook import xgboost as engine
from sdlocal.hook._job_paths import resolve_out_dir, resolve_tensorboard_dir
from sdlocal.hook.config import HookConfig
from sdlocal.hook.errors import HookConfigError
from sdlocal.trial.modes import ModeKeys
from smdebug.core.save_config import SaveConfig

logger = logging.getLogger("smdebug")

DEFAULT_INCLUDE_COLLECTIONS = ("metrics",)
DEFAULT_SAVE_INTERVAL = 10


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else [str(v) for v in value]


def _hook_parameters(save_config: SaveConfig) -> dict[str, str]:
    """The GLOBAL mode's save config (the XGBoost hook saves in GLOBAL mode) as HookParameters."""
    mode = save_config.mode_save_configs.get(ModeKeys.GLOBAL)
    if mode is None:
        return {"save_interval": str(DEFAULT_SAVE_INTERVAL)}
    params = {"save_interval": str(mode.save_interval), "start_step": str(mode.start_step)}
    if mode.end_step is not None:
        params["end_step"] = str(mode.end_step)
    if mode.save_steps:
        params["save_steps"] = ",".join(str(s) for s in mode.save_steps)
    return params


class Hook(engine.Hook):
    def __init__(self, out_dir: str | None = None, export_tensorboard: bool = False,
                 tensorboard_dir: str | None = None, dry_run: bool = False, reduction_config: Any = None,
                 save_config: Any = None, include_regex: list[str] | str | None = None,
                 include_collections: list[str] | None = None, save_all: bool = False,
                 include_workers: str = "one", hyperparameters: dict[str, Any] | None = None,
                 train_data: Any = None, validation_data: Any = None) -> None:
        path = resolve_out_dir(out_dir, logger)
        if include_workers not in ("one", "all"):
            raise HookConfigError("include_workers", f"expected 'one' or 'all', got {include_workers!r}")
        if reduction_config is not None:
            logger.warning("'reduction_config' is not supported by the XGBoost hook and is ignored")
        sc = SaveConfig.parse(save_config) if save_config is not None else SaveConfig(save_interval=DEFAULT_SAVE_INTERVAL)
        params: dict[str, Any] = _hook_parameters(sc)
        regex = _as_list(include_regex)
        if regex:
            params["include_regex"] = ",".join(regex)
        if save_all:
            params["save_all"] = "true"
        params["include_workers"] = include_workers
        names = _as_list(include_collections) if include_collections is not None else list(DEFAULT_INCLUDE_COLLECTIONS)
        config = HookConfig.from_dict({"LocalPath": str(path), "HookParameters": params,
                                       "CollectionConfigurations": [{"CollectionName": n} for n in names]},
                                      framework="xgboost")
        self.export_tensorboard = bool(export_tensorboard)
        tb = resolve_tensorboard_dir(self.export_tensorboard, tensorboard_dir or None, path)
        self.save_config = sc
        self.include_collections = names
        super().__init__(config, out_dir=path, hyperparameters=hyperparameters,
                         train_data=engine.load_data(train_data, "train_data"),
                         validation_data=engine.load_data(validation_data, "validation_data"),
                         tensorboard_dir=tb, dry_run=dry_run)
        self.tensorboard_dir = tb

    @classmethod
    def create_from_json_file(cls, json_file_path: str | os.PathLike[str] | None = None) -> Hook:  # type: ignore[override]
        """From the job's debughookconfig.json (or `json_file_path`); FileNotFoundError without one,
        as smdebug. Per-collection save configs are the file's."""
        path = Path(json_file_path if json_file_path is not None else HookConfig.default_path())
        if not path.is_file():
            raise FileNotFoundError(errno.ENOENT, "no hook config file", str(path))
        config = HookConfig.from_json_file(path, framework="xgboost")
        hook = cls.__new__(cls)
        hook.export_tensorboard = False
        hook.save_config = SaveConfig()
        hook.include_collections = sorted(config.saved_collection_names)
        tb = _tensorboard.job_dir(config.tensorboard_dir)
        engine.Hook.__init__(hook, config, tensorboard_dir=tb)
        hook.tensorboard_dir = tb
        hook.export_tensorboard = tb is not None
        return hook

    hook_from_config = create_from_json_file  # smdebug's old name


def get_hook(json_config_path: str | os.PathLike[str] | None = None,
             create_if_not_exists: bool = False) -> engine.Hook | None:
    hook = _current.current()
    if isinstance(hook, engine.Hook):
        return hook
    if not create_if_not_exists:
        return None
    try:
        return Hook.create_from_json_file(json_config_path)
    except FileNotFoundError:
        return None


def set_hook(custom_hook: engine.Hook) -> None:
    if not isinstance(custom_hook, engine.Hook):
        raise HookConfigError("set_hook", f"custom_hook={custom_hook!r} must be a Hook")
    _current.set_current(custom_hook)


def del_hook() -> None:
    _current.set_current(None)
