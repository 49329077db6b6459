"""smdebug.pytorch.singleton_utils: the process's hook (smdebug's singleton), kept by hook._current.

`get_hook()` returns the current smdebug.pytorch.Hook (the one created last), or None; sdlocal's
zero-code hook is not one (on SageMaker, PyTorch >= 1.13 has no zero-code hook either).
`get_hook(create_if_not_exists=True)` creates one from the job's hook config when there is none
(None without a config file); under `python -m sdlocal.hook.run` that hook replaces the zero-code hook.
"""
from __future__ import annotations

import os

from sdlocal.hook import _current
from sdlocal.hook.errors import HookConfigError
from sdlocal.hook.pytorch import Hook as _EngineHook
from smdebug.pytorch.hook import Hook


def get_hook(json_config_path: str | os.PathLike[str] | None = None,
             create_if_not_exists: bool = False) -> Hook | None:
    hook = _current.current()
    if isinstance(hook, Hook):
        return hook
    if not create_if_not_exists:
        return None
    try:
        return Hook.create_from_json_file(json_config_path)
    except FileNotFoundError:
        return None


def set_hook(custom_hook: Hook) -> None:
    """Make `custom_hook` the current hook."""
    if not isinstance(custom_hook, _EngineHook):
        raise HookConfigError("set_hook", f"custom_hook={custom_hook!r} must be a Hook")
    _current.set_current(custom_hook)


def del_hook() -> None:
    _current.set_current(None)


__all__ = ["del_hook", "get_hook", "set_hook"]
