"""`python -m hook.run train.py ARGS...`: run an unmodified training script with the hook attached.

Global torch module hooks find the model: the first module that runs forward at top level (not
from inside another module's forward) and has trainable parameters gets a Hook; `_Loss` modules
called at top level are registered as losses. The global hooks are removed a few steps after the
model is found, so the rest of training pays only for the per-module hooks. Without a hook
config file the script runs unchanged (as on SageMaker without a DebugHookConfig).
"""
from __future__ import annotations

import logging
import os
import runpy
import sys
from collections.abc import Sequence
from typing import Any

import torch

from hook.config import HookConfig
from hook.errors import HookError
from hook.pytorch import Hook

logger = logging.getLogger(__name__)

# Loss modules are usually called in the first step; after this many steps we stop looking.
LOSS_SEARCH_STEPS = 3


class AutoAttach:
    """Installs the global hooks; `close()` removes them and closes the Hook (if one was made)."""

    def __init__(self, config: HookConfig) -> None:
        self.config = config
        self.hook: Hook | None = None
        self._depth = 0
        self._handles: list[Any] = []

    def install(self) -> None:
        mod = torch.nn.modules.module
        self._handles = [
            mod.register_module_forward_pre_hook(self._pre),
            mod.register_module_forward_hook(self._post, always_call=True),
        ]

    def _pre(self, module: torch.nn.Module, inputs: Any) -> None:
        depth = self._depth
        self._depth = depth + 1
        if depth:
            return
        hook = self.hook
        if hook is None:
            if isinstance(module, torch.nn.modules.loss._Loss):
                return
            if not any(p.requires_grad for p in module.parameters()):
                return
            hook = self.hook = Hook(self.config)
            hook.register_module(module)
            # The module's own pre-hook list was read before we registered: start the step here.
            hook._on_step_start(module, inputs)
        elif isinstance(module, torch.nn.modules.loss._Loss):
            hook.register_loss(module)
        elif hook.step >= LOSS_SEARCH_STEPS:
            self._uninstall()

    def _post(self, module: torch.nn.Module, inputs: Any, outputs: Any) -> None:
        self._depth = max(self._depth - 1, 0)

    def _uninstall(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []

    def close(self) -> None:
        self._uninstall()
        if self.hook is not None:
            self.hook.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print("usage: python -m hook.run SCRIPT [ARGS...]", file=sys.stderr)
        return 2
    script = args[0]
    if not os.path.isfile(script):
        print(f"hook.run: no such script: {script}", file=sys.stderr)
        return 2
    config_path = HookConfig.default_path()
    attach: AutoAttach | None = None
    if os.path.isfile(config_path):
        try:
            attach = AutoAttach(HookConfig.from_json_file(config_path))
        except HookError as e:
            print(f"hook.run: bad hook config {config_path}: {e}", file=sys.stderr)
            return 2
        attach.install()
    else:
        logger.info("no hook config at %s: the hook is disabled", config_path)

    sys.argv = [script, *args[1:]]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        if e.code not in (None, 0):
            _close_quietly(attach)
            raise
    except BaseException:
        # The script failed (or exited): still write what it saved, then let the error through.
        _close_quietly(attach)
        raise
    if attach is not None:
        try:
            attach.close()
        except HookError as e:
            print(f"hook.run: {e}", file=sys.stderr)
            return 1
    return 0


def _close_quietly(attach: AutoAttach | None) -> None:
    if attach is None:
        return
    try:
        attach.close()
    except HookError as e:
        print(f"hook.run: {e}", file=sys.stderr)

if __name__ == "__main__":
    raise SystemExit(main())
