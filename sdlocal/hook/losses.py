"""The loss of an unchanged script, wherever it is computed (used by the zero-code hook).

smdebug's zero-code hook saves the outputs of `_Loss` modules the script calls itself
(`CrossEntropyLoss_output_0`). Trainings written today mostly compute their loss elsewhere: inside
the model's own forward (Hugging Face models return it in their `ModelOutput`), or with a function
(`F.cross_entropy`, Lightning's idiom). `LossTap` finds it where every training must hand it over:

- what is backpropagated: `torch.autograd.backward` (which `Tensor.backward` calls) is wrapped; a
  single floating value backpropagated is the step's loss. A value `GradScaler.scale` made is
  taken unscaled (the scaler's input).
- the `loss` of the watched model's output (a `ModelOutput` / mapping / object with a `loss`
  tensor): the loss of evaluation steps too, where nothing is backpropagated.
- a framework integration hands it over (Lightning's validation_step output: hook/frameworks).

All are saved as `loss_output_<i>` (collection `losses`). In a step the model's forward starts:
`loss_output_0` is the model's output loss when it has one, else the i-th value backpropagated
(a GAN's discriminator and generator losses: `loss_output_0`, `loss_output_1`). In a TRAIN step a
trainer's loop starts (one optimizer step, gradient accumulation included): `loss_output_0` is the
sum of what its micro-batches backpropagated, which both the Trainer and Lightning scale so that
it is the step's mean loss. A script whose loss modules the hook registered saves those instead.
Nothing here may fail a training: an unexpected value is ignored.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from sdlocal.hook.pytorch import Hook
from sdlocal.trial.modes import ModeKeys

LOSS_NAME = "loss_output_{}"


def output_loss(outputs: Any) -> torch.Tensor | None:
    """The `loss` tensor of a model's output (ModelOutput, dict, or an object with `.loss`)."""
    loss = outputs.get("loss") if isinstance(outputs, Mapping) else getattr(outputs, "loss", None)
    return loss if _is_loss(loss) else None


def _is_loss(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.numel() == 1 and value.is_floating_point()


class LossTap:
    """Wraps torch.autograd.backward and GradScaler.scale (`install`/`uninstall`); saves into `hook`."""

    def __init__(self) -> None:
        self.hook: Hook | None = None
        self._backward: Any = None
        self._scale: Any = None
        self._scaled: tuple[torch.Tensor | None, torch.Tensor | None] = (None, None)  # (scaled, unscaled)
        self._step = -2
        self._count = 0  # values backpropagated in this step
        self._sum: torch.Tensor | None = None
        self._from_output = False  # this step's loss is the model output's

    def install(self) -> None:
        if self._backward is not None:
            return
        original = self._backward = torch.autograd.backward
        tap = self

        def backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
            if tap.hook is not None and isinstance(tensors, torch.Tensor):
                tap._backpropagated(tensors)
            return original(tensors, *args, **kwargs)

        backward.__wrapped__ = original  # type: ignore[attr-defined]
        torch.autograd.backward = backward
        scaler = torch.amp.GradScaler
        scale = self._scale = scaler.scale

        def scale_loss(self_: Any, outputs: Any) -> Any:
            scaled = scale(self_, outputs)
            if isinstance(outputs, torch.Tensor) and isinstance(scaled, torch.Tensor):
                tap._scaled = (scaled, outputs)
            return scaled

        scaler.scale = scale_loss  # type: ignore[method-assign, assignment]

    def uninstall(self) -> None:
        if self._backward is not None:
            torch.autograd.backward = self._backward
            self._backward = None
        if self._scale is not None:
            torch.amp.GradScaler.scale = self._scale  # type: ignore[method-assign]
            self._scale = None
        self._scaled = (None, None)
        self.hook = None

    # ------------------------------------------------------------------ what is seen
    def _hook_saving(self) -> Hook | None:
        hook = self.hook
        if hook is None or hook.closed or not hook._active or hook._loss_modules:
            return None
        if hook.step != self._step:
            self._step, self._count, self._sum, self._from_output = hook.step, 0, None, False
        return hook

    def _backpropagated(self, value: torch.Tensor) -> None:
        if not _is_loss(value):
            return
        scaled, unscaled = self._scaled
        if scaled is value and unscaled is not None:
            value = unscaled
        self._scaled = (None, None)
        hook = self._hook_saving()
        if hook is None or self._from_output:
            return
        value = value.detach()
        if hook.mode in hook.external_steps:  # one optimizer step of a trainer: the micro-batches' sum
            self._sum = value if self._sum is None else self._sum + value
            self._save(hook, LOSS_NAME.format(0), self._sum)
        else:
            self._save(hook, LOSS_NAME.format(self._count), value)
            self._count += 1

    def model_output(self, module: torch.nn.Module, inputs: Any, outputs: Any) -> None:
        """A forward hook on the watched model: its output's `loss`."""
        hook = self._hook_saving()
        if hook is None or (hook.mode == ModeKeys.TRAIN and ModeKeys.TRAIN in hook.external_steps):
            return  # a trainer's TRAIN step: what its micro-batches backpropagated
        loss = output_loss(outputs)
        if loss is not None:
            self.save(loss)
            self._from_output = True

    def save(self, value: Any) -> None:
        """The loss of the current step, handed over (a framework's evaluation step)."""
        hook = self._hook_saving()
        if hook is not None and _is_loss(value):
            self._save(hook, LOSS_NAME.format(0), value.detach())

    @staticmethod
    def _save(hook: Hook, name: str, value: torch.Tensor) -> None:
        hit = hook._mask_of(name) & hook._active
        if hit:
            hook._record(name, value.reshape(()), hit)
