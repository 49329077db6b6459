"""Hugging Face `Trainer`, unchanged: a `TrainerCallback` added to every Trainer's callbacks.

Steps (documented in README, "Hugging Face and Lightning"):
- TRAIN step n is the Trainer's optimizer step n (`state.global_step` before it, from 0 for a
  fresh training): all its gradient-accumulation micro-batches are one step. Its loss
  (`loss_output_0`) is the sum of what the micro-batches backpropagated, which the Trainer scales
  so that it is the step's mean loss (hook.losses); its gradients are `param.grad` right before the
  optimizer step (`on_pre_optimizer_step`: accumulated, unscaled, clipped); its weights are those
  its first micro-batch's forward saw.
- EVAL steps are the evaluation batches (`trainer.evaluate()`, `eval_strategy="steps"`, predict),
  one step each, numbered on across evaluations; their loss is the batch's loss as the Trainer
  computes it (`Trainer.prediction_step`'s: the `eval_loss` it logs is their mean), else (a
  `prediction_step` of the script's own that returns none) the model output's `loss`. Under several
  processes (`accelerate launch`, torchrun) the Trainer multiplies a model's loss by the number of
  processes when the model takes loss keyword arguments (`average_tokens_across_devices`): TRAIN and
  EVAL losses are both the Trainer's, so they stay on one scale, the one it logs.
- The global step counts both, in the order they ran.

A script whose own smdebug hook is the job's hook (a `TrainerCallback` of its own calling
`smd.Hook.create_from_json_file()` and `register_module`) keeps it: nothing else saves, and its
steps take TRAIN/EVAL from the model's mode (`model.train()`/`model.eval()`, which the Trainer sets)
instead of smdebug's GLOBAL, unless the script calls `set_mode` itself.
"""
from __future__ import annotations

import functools
from types import ModuleType
from typing import Any

from sdlocal.hook import _autoattach, _current
from sdlocal.hook._on_import import OnImport
from sdlocal.trial.modes import ModeKeys

MODULE = "transformers.trainer_callback"
TRAINER_MODULE = "transformers.trainer"
_finders: list[OnImport] = []


def install() -> None:
    """Add the callback to every Trainer the script makes, and take each evaluation batch's loss
    from `Trainer.prediction_step` (transformers patched when imported)."""
    if not _finders:
        _finders.extend([OnImport(MODULE, _patch), OnImport(TRAINER_MODULE, _patch_trainer)])
    for finder in _finders:
        finder.install()


def uninstall() -> None:
    for finder in _finders:
        finder.uninstall()


def _patch(module: ModuleType) -> None:
    handler = module.CallbackHandler
    if getattr(handler, "_sdlocal_patched", False):
        return
    callback_class = _callback_class(module.TrainerCallback)
    original = handler.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        if _autoattach.active() is not None:
            self.add_callback(callback_class())

    handler.__init__ = init
    handler._sdlocal_patched = True


def _patch_trainer(module: ModuleType) -> None:
    trainer = module.Trainer
    if getattr(trainer, "_sdlocal_patched", False):
        return
    original = trainer.prediction_step

    @functools.wraps(original)
    def prediction_step(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = original(self, *args, **kwargs)
        attacher = _autoattach.active()
        if attacher is not None and isinstance(out, tuple) and out:
            attacher.losses.save(out[0])  # (a None or non-scalar loss is ignored)
        return out

    trainer.prediction_step = prediction_step
    trainer._sdlocal_patched = True


def _callback_class(base: type) -> type:
    class SdlocalDebuggerCallback(base):  # type: ignore[valid-type, misc]
        """sdlocal's zero-code hook following the Trainer's loops (hook/frameworks/hf.py)."""

        def __init__(self) -> None:
            self.hook: Any = None

        def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
            attacher = _autoattach.active()
            if attacher is not None and model is not None:
                self.hook = attacher.adopt(model, frozenset({ModeKeys.TRAIN}))
            _follow_model_mode()

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            hook = self.hook
            if hook is not None and not hook.closed:
                hook.begin_step(ModeKeys.TRAIN)
            elif state.global_step == 0:
                _follow_model_mode()  # a script hook made in the first step

        def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            hook = self.hook
            if hook is not None and not hook.closed:
                hook.save_final_gradients()

    return SdlocalDebuggerCallback


def _follow_model_mode() -> None:
    """The script's own smdebug hook, still in smdebug's GLOBAL mode: TRAIN/EVAL from the model."""
    hook = _current.current()
    if hook is not None and not hook.auto and getattr(hook, "_explicit_mode", None) == ModeKeys.GLOBAL:
        hook._explicit_mode = None  # type: ignore[attr-defined]
