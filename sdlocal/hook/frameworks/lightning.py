"""Lightning, unchanged: a `Callback` that Lightning's Trainer loads itself, through the
`lightning.pytorch.callbacks_factory` entry point (`pytorch_lightning.callbacks_factory` for the
older package name) that sdlocal's pyproject.toml declares; it is there only in a process where
the zero-code hook is attached (`python -m sdlocal.hook.run`, the zero-code sitecustomize).

The LightningModule is the watched model (`<ModuleClass>_<param>`). Steps (README, "Hugging Face
and Lightning"):
- TRAIN step n is Lightning's optimizer step n (`trainer.global_step`): the batches of one
  gradient accumulation are one step. Its loss (`loss_output_0`) is what `training_step` returned,
  as backpropagated (Lightning divides it by `accumulate_grad_batches`: the sum over the step is its
  mean; functional losses such as `F.cross_entropy` included); its gradients are `param.grad` in
  `on_before_optimizer_step` (accumulated, unscaled; before clipping).
- EVAL steps are the validation batches (and `trainer.test`'s), one step each, numbered on across
  validations; their loss is `validation_step`'s returned loss (a tensor or a dict's "loss"), else
  the first value it logged with "loss" in its name (`self.log("val_loss", loss)`). The sanity
  check's batches save nothing. PREDICT steps are `trainer.predict`'s batches.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sdlocal.hook import _autoattach
from sdlocal.trial.modes import ModeKeys

_ALL = frozenset(ModeKeys)


def callbacks() -> list[Any]:
    """The `lightning.pytorch.callbacks_factory` entry point."""
    return _callbacks("lightning.pytorch")


def pytorch_lightning_callbacks() -> list[Any]:
    """The `pytorch_lightning.callbacks_factory` entry point."""
    return _callbacks("pytorch_lightning")


def _callbacks(package: str) -> list[Any]:
    attacher = _autoattach.active()
    if attacher is None or attacher.config is None:
        return []
    import importlib

    base = importlib.import_module(package).Callback
    return [_callback_class(base)(attacher)]


def _eval_loss(outputs: Any) -> Any:
    if isinstance(outputs, Mapping):
        return outputs.get("loss")
    return outputs


def _callback_class(base: type) -> type:
    class SdlocalDebuggerCallback(base):  # type: ignore[valid-type, misc]
        """sdlocal's zero-code hook following Lightning's loops (hook/frameworks/lightning.py)."""

        def __init__(self, attacher: _autoattach.AutoAttach) -> None:
            self.attacher = attacher
            self.hook: Any = None
            self._train_step: int | None = None  # the global_step of the TRAIN step running
            self._logged_loss = False
            self._module: Any = None
            self._log: Any = None

        def _live(self) -> Any:
            hook = self.hook
            return hook if hook is not None and not hook.closed else None

        def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
            self._adopt(pl_module)

        def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
            self._adopt(pl_module)  # trainer.validate() without fit

        def on_test_start(self, trainer: Any, pl_module: Any) -> None:
            self._adopt(pl_module)

        def on_predict_start(self, trainer: Any, pl_module: Any) -> None:
            self._adopt(pl_module)

        def _adopt(self, pl_module: Any) -> None:
            if self.hook is None:
                self.hook = self.attacher.adopt(pl_module, _ALL)
            if self._live() is not None and "log" not in pl_module.__dict__:
                self._watch_log(pl_module)

        def _watch_log(self, pl_module: Any) -> None:
            """`self.log(name, value)` of an EVAL step: a value named like a loss is its loss,
            when validation_step returns none."""
            original = pl_module.log
            callback = self

            def log(name: str, value: Any, *args: Any, **kwargs: Any) -> Any:
                hook = callback._live()
                if (hook is not None and hook.mode == ModeKeys.EVAL and not callback._logged_loss
                        and "loss" in name.lower()):
                    callback._logged_loss = True
                    callback.attacher.losses.save(value)
                return original(name, value, *args, **kwargs)

            pl_module.log = log
            self._module, self._log = pl_module, log

        def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
            hook = self._live()
            if hook is not None and trainer.global_step != self._train_step:
                self._train_step = trainer.global_step
                hook.begin_step(ModeKeys.TRAIN)

        def on_before_optimizer_step(self, trainer: Any, pl_module: Any, optimizer: Any) -> None:
            hook = self._live()
            if hook is not None:
                hook.save_final_gradients()

        def _eval_batch_start(self, trainer: Any, mode: ModeKeys) -> None:
            hook = self._live()
            if hook is None:
                return
            if trainer.sanity_checking:
                hook.pause()
            else:
                self._logged_loss = False
                hook.begin_step(mode)

        def _eval_batch_end(self, outputs: Any) -> None:
            if self._live() is not None and not self._logged_loss:
                self.attacher.losses.save(_eval_loss(outputs))

        def _eval_end(self) -> None:
            hook = self._live()
            if hook is not None:
                hook.pause()
                self._train_step = None  # training goes on in a new step

        def on_validation_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int,
                                      dataloader_idx: int = 0) -> None:
            self._eval_batch_start(trainer, ModeKeys.EVAL)

        def on_validation_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                                    batch_idx: int, dataloader_idx: int = 0) -> None:
            self._eval_batch_end(outputs)

        def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
            self._eval_end()

        def on_test_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int,
                                dataloader_idx: int = 0) -> None:
            self._eval_batch_start(trainer, ModeKeys.EVAL)

        def on_test_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                              batch_idx: int, dataloader_idx: int = 0) -> None:
            self._eval_batch_end(outputs)

        def on_test_end(self, trainer: Any, pl_module: Any) -> None:
            self._eval_end()

        def on_predict_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int,
                                   dataloader_idx: int = 0) -> None:
            self._eval_batch_start(trainer, ModeKeys.PREDICT)

        def on_predict_end(self, trainer: Any, pl_module: Any) -> None:
            self._eval_end()

        def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
            if self._module is not None and self._module.__dict__.get("log") is self._log:
                del self._module.__dict__["log"]  # the module's own method again

    return SdlocalDebuggerCallback
