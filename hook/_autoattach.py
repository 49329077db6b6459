"""Attach a Hook to whatever model an unmodified script trains (used by `python -m hook.run`).

Global torch module hooks find the model: the first module that runs forward at top level (not
from inside another module's forward) and has trainable parameters gets a Hook; `_Loss` modules
called at top level are registered as losses. The global hooks are removed a few steps after the
model is found, so the rest of training pays only for the per-module hooks.

A job with a profiler config and no hook config gets a hook that saves no tensor (and writes no
trial): it only drives the framework timeline (hook._timeline).

One hook per job: when the script has made its own hook (`smd.Hook(...)`,
`Hook.create_from_json_file()`, `get_hook(create_if_not_exists=True)`, a Hook subclass, or
sdlocal's `hook.pytorch.Hook`) before its first forward, no hook is attached at all; when it makes
it later, the zero-code hook hands over to it (hook._current, `Hook._hand_over_to`).
"""
from __future__ import annotations

from typing import Any

import torch

from hook import _current
from hook.config import HookConfig
from hook.pytorch import Hook

# Loss modules are usually called in the first step; after this many steps we stop looking.
LOSS_SEARCH_STEPS = 3
# The zero-code hook of a job that profiles but saves no tensor.
TIMELINE_ONLY = HookConfig(collections=(), saved_collection_names=frozenset())


class AutoAttach:
    """Installs the global hooks; `close()` removes them and closes the Hook (if one was made).
    `config` None: the hook only records the framework timeline."""

    def __init__(self, config: HookConfig | None) -> None:
        self.config = config
        self.hook: Hook | None = None
        self._depth = 0
        self._handles: list[Any] = []
        self._before = 0

    def install(self) -> None:
        self._before = _current.script_hooks_created()  # hooks made before the script ran are not its
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
            if _current.script_hooks_created() != self._before:
                self._uninstall()  # the script made its own hook: it is the job's only hook
                return
            if isinstance(module, torch.nn.modules.loss._Loss):
                return
            if not any(p.requires_grad for p in module.parameters()):
                return
            if self.config is None:
                hook = self.hook = Hook(TIMELINE_ONLY, auto=True, dry_run=True)
            else:
                hook = self.hook = Hook(self.config, auto=True)
            hook.register_module(module)
            # The module's own pre-hook list was read before we registered: start the step here.
            hook._on_step_start(module, inputs)
        elif hook.handed_over:
            self._uninstall()
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
