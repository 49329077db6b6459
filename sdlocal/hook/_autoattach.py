"""Attach a Hook to whatever model an unmodified script trains (used by `python -m sdlocal.hook.run`).

Global torch module hooks find the models: a module that runs forward at top level (not from
inside another module's forward) is watched when an optimizer holds some of its parameters (every
optimizer the script makes is known: `Optimizer.__init__` is wrapped); before any optimizer exists,
when it has trainable parameters. The first one watched starts the steps (its forward), the others
are watched too (a GAN's two models; hook.pytorch `watch_module`); a module no optimizer holds
(a distillation's frozen teacher) is not. `_Loss` modules called at top level are registered as
losses; else the loss is what is backpropagated or the model output's `loss` (hook.losses). The
global hooks are removed a few steps after the model is found, so the rest of training pays only
for the per-module hooks. Hugging Face's Trainer and Lightning drive the steps from their own loops
(hook/frameworks, through `adopt`).

A job with a profiler config and no hook config gets a `TimelineHook` instead: it saves no tensor
(writes no trial) and only drives the framework timeline (hook._timeline), at a fraction of a
Hook's per-step cost; a hook the script creates takes over from it as from the zero-code Hook.

One hook per job: when the script has made its own hook (`smd.Hook(...)`,
`Hook.create_from_json_file()`, `get_hook(create_if_not_exists=True)`, a Hook subclass, or
sdlocal's `sdlocal.hook.pytorch.Hook`) before its first forward, no hook is attached at all; when it makes
it later, the zero-code hook hands over to it (hook._current, `Hook._hand_over_to`).
"""
from __future__ import annotations

import weakref
from typing import Any

import torch

from sdlocal.hook import _current, _timeline
from sdlocal.hook.config import HookConfig
from sdlocal.hook.frameworks import hf
from sdlocal.hook.losses import LossTap
from sdlocal.hook.pytorch import Hook
from sdlocal.trial.modes import ModeKeys

# Loss modules are usually called in the first step; after this many steps we stop looking.
LOSS_SEARCH_STEPS = 3
_TRAIN, _EVAL = ModeKeys.TRAIN, ModeKeys.EVAL  # (an Enum attribute lookup costs more, every step)


class TimelineHook:
    """The zero-code hook of a job that profiles and saves no tensor: the model's forward pre-hook
    starts a timeline step (TRAIN or EVAL from `model.training`, as the zero-code Hook decides),
    its forward hook ends the forward. One hook per job (hook._current): a hook the script
    creates takes over, and the timeline goes on with it."""

    auto = True

    def __init__(self, timeline: _timeline.Timeline) -> None:
        self._timeline = timeline
        self._name = ""
        self._handles: list[Any] = []
        self._closed = False
        self.handed_over = False
        _current.install(self)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def step(self) -> int:
        return self._timeline.step

    def register_module(self, module: torch.nn.Module) -> None:
        self._name = module._get_name()
        self._handles = [module.register_forward_pre_hook(self._on_step_start),
                         module.register_forward_hook(self._timeline.forward_end)]

    def register_loss(self, module: torch.nn.Module) -> None:
        pass  # nothing to save

    def _on_step_start(self, module: torch.nn.Module, inputs: Any) -> None:
        self._timeline.step_start(_TRAIN if module.training else _EVAL, self._name)

    def _stop(self) -> None:
        self._closed = True
        for h in self._handles:
            h.remove()
        self._handles = []

    def _hand_over_to(self, new: Any) -> None:
        self._stop()
        self.handed_over = True

    def close(self) -> None:
        if not self._closed:
            self._stop()
            self._timeline.close()


def _inside(hook: Hook, module: torch.nn.Module) -> bool:
    """Whether `module` is (part of) a model the hook watches already, or a wrapper of one (the
    `DistributedDataParallel` that accelerate and the Trainer wrap the model in: watching it too
    would save every gradient twice, under a second name)."""
    watched = [w for w in (hook._model, *(m for m, _ in hook._extra_models)) if w is not None]
    return (any(module is sub for w in watched for sub in w.modules())
            or any(w is sub for sub in module.modules() for w in watched))


_active: AutoAttach | None = None  # this process's (for hook/frameworks)


def active() -> AutoAttach | None:
    """The zero-code hook's attacher of this process, if `sdlocal.hook.run` installed one."""
    return _active


class AutoAttach:
    """Installs the global hooks; `close()` removes them and closes the Hook (if one was made).
    `config` None: the hook only records the framework timeline."""

    def __init__(self, config: HookConfig | None) -> None:
        self.config = config
        self.hook: Hook | TimelineHook | None = None
        self.losses = LossTap()
        self._depth = 0
        self._handles: list[Any] = []
        self._before = 0
        self._optimizers: weakref.WeakSet[torch.optim.Optimizer] = weakref.WeakSet()
        self._optimizer_init: Any = None
        self._loss_handle: Any = None

    def install(self) -> None:
        global _active
        _active = self
        self._before = _current.script_hooks_created()  # hooks made before the script ran are not its
        mod = torch.nn.modules.module
        self._handles = [
            mod.register_module_forward_pre_hook(self._pre),
            mod.register_module_forward_hook(self._post, always_call=True),
        ]
        if self.config is not None:
            self.losses.install()
            self._track_optimizers()
            hf.install()  # Lightning's callback comes through its entry point (hook/frameworks)

    def _track_optimizers(self) -> None:
        original = self._optimizer_init = torch.optim.Optimizer.__init__
        known = self._optimizers

        def init(opt: torch.optim.Optimizer, *args: Any, **kwargs: Any) -> None:
            original(opt, *args, **kwargs)
            known.add(opt)

        torch.optim.Optimizer.__init__ = init  # type: ignore[method-assign, assignment]

    def _trained(self, module: torch.nn.Module) -> bool:
        """Whether the training updates this module: an optimizer holds some of its parameters
        (before any optimizer exists: it has trainable parameters)."""
        if not any(p.requires_grad for p in module.parameters()):
            return False
        held = {id(p) for opt in list(self._optimizers) for g in opt.param_groups for p in g["params"]}
        return not held or any(id(p) in held for p in module.parameters())

    def adopt(self, module: torch.nn.Module, external: frozenset[ModeKeys]) -> Hook | None:
        """For a framework integration (hook/frameworks): the zero-code Hook watching `module` (made
        now if no forward made it yet), whose `external` modes' steps the framework's loop starts and
        whose gradients it saves when final; None when the script made its own hook (or none saves)."""
        hook = self.hook
        if hook is None:
            if self.config is None or _current.script_hooks_created() != self._before:
                return None
            hook = self._attach(module)
        if not isinstance(hook, Hook) or hook.handed_over or hook.closed:
            return None
        if not _inside(hook, module):
            hook.watch_module(module)
        hook.external_steps = external
        if not hook.final_gradients_only:
            hook.final_gradients_only = True
            hook._reattach()
        return hook

    def _attach(self, module: torch.nn.Module) -> Hook:
        assert self.config is not None
        hook = self.hook = Hook(self.config, auto=True)
        hook.register_module(module)
        self.losses.hook = hook
        self._loss_handle = module.register_forward_hook(self.losses.model_output)
        return hook

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
            if not self._trained(module):
                return
            if self.config is not None:
                hook = self._attach(module)
            else:
                tl = _timeline.current()
                if tl is None:  # nothing to record: no hook at all
                    self._uninstall()
                    return
                hook = self.hook = TimelineHook(tl)
                hook.register_module(module)
            # The module's own pre-hook list was read before we registered: start the step here.
            hook._on_step_start(module, inputs)
            if isinstance(hook, TimelineHook):
                self._uninstall()  # no loss to look for
        elif hook.handed_over:
            self._uninstall()
        elif isinstance(module, torch.nn.modules.loss._Loss):
            hook.register_loss(module)
        elif hook.step >= LOSS_SEARCH_STEPS:
            self._uninstall()
        elif isinstance(hook, Hook) and not _inside(hook, module) and self._trained(module):
            hook.watch_module(module)  # another model the training updates (a GAN's)

    def _post(self, module: torch.nn.Module, inputs: Any, outputs: Any) -> None:
        self._depth = max(self._depth - 1, 0)

    def _uninstall(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []

    def close(self) -> None:
        global _active
        self._uninstall()
        self.losses.uninstall()
        hf.uninstall()
        if self._optimizer_init is not None:
            torch.optim.Optimizer.__init__ = self._optimizer_init  # type: ignore[method-assign]
            self._optimizer_init = None
        if self._loss_handle is not None:
            self._loss_handle.remove()
        if _active is self:
            _active = None
        if self.hook is not None:
            self.hook.close()
