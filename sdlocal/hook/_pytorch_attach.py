"""The PyTorch hook's torch callbacks: the hooks on modules, parameters and losses that take a
snapshot of each tensor a saved collection wants at this step (hook/_pytorch_state.py says how the
parts of `Hook` fit). `_forward_hook_for` / `_grad_hook` are where a subclass (smdebug.pytorch.Hook)
plugs in its own module and gradient callbacks."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from sdlocal.hook import _members as members
from sdlocal.hook._copier import Rows, Snapshot
from sdlocal.hook._pytorch_state import GRADIENT_PREFIX, HookState
from sdlocal.hook._unsaveable import skipped, unsaveable
from sdlocal.hook.errors import HookError


class Attaching(HookState):
    def register_loss(self, loss_module: torch.nn.Module) -> None:
        """Save the outputs of a loss module (`CrossEntropyLoss_output_0`)."""
        if not isinstance(loss_module, torch.nn.Module):
            raise HookError(f"register_loss needs a torch.nn.Module, got {type(loss_module).__name__}")
        if any(m is loss_module for m in self._loss_modules):
            return
        self._loss_modules.append(loss_module)
        self._attach_loss(loss_module)

    def watch_module(self, module: torch.nn.Module) -> None:
        """Save another model's weights, gradients and outputs too (a GAN's second model); the
        registered module still starts the steps. Names: `<Class>_...`, `<Class>_1_...` when two
        watched modules share a class."""
        if module is self._model or any(m is module for m, _ in self._extra_models):
            return
        names = {self._model_name, *(n for _, n in self._extra_models)}
        name, i = module._get_name(), 1
        while name in names:
            name, i = f"{module._get_name()}_{i}", i + 1
        self._extra_models.append((module, name))
        self._attach_model(module, name)

    def _attach_model(self, module: torch.nn.Module, cls_name: str | None = None) -> None:
        cls_name = cls_name or module._get_name()
        for pname, param in module.named_parameters():
            tname = f"{cls_name}_{pname}"
            mask = self._mask_of(tname)
            if mask:
                self._params.append((tname, param, mask))
                self._param_mask |= mask
            if param.requires_grad:
                gmask = self._mask_of(GRADIENT_PREFIX + tname)
                if gmask:
                    self._grad_params.append((GRADIENT_PREFIX + tname, param, gmask))
                on_grad = None if self.final_gradients_only else self._grad_hook(tname)
                if on_grad is not None:
                    self._attach_handles.append(param.register_hook(on_grad))
        # a watched module's submodules: `<Class>.<path>` (the registered model's: `<path>`, as smdebug)
        prefix = "" if module is self._model else cls_name + "."
        for path, sub in module.named_modules():
            on_forward = self._forward_hook_for(sub, prefix + path if path else cls_name, top=sub is module)
            if on_forward is not None:
                self._attach_handles.append(sub.register_forward_hook(on_forward))

    def _attach_loss(self, loss_module: torch.nn.Module) -> None:
        name = loss_module._get_name()
        on_forward = self._forward_hook_for(loss_module, name)
        if on_forward is not None:
            self._attach_handles.append(loss_module.register_forward_hook(on_forward))
        lbits = members.bit_of(self._colls, members.LABELS)
        pbits = members.bit_of(self._colls, members.PREDICTIONS)
        if self.ROLE_TENSORS_BY_NAME:
            lbits |= self._mask_of(name + members.LABELS_SUFFIX)
            pbits |= self._mask_of(name + members.PREDICTIONS_SUFFIX)
        if lbits or pbits:
            self._attach_handles.append(loss_module.register_forward_hook(self._make_loss_hook(name, lbits, pbits)))

    def _reattach(self) -> None:
        """After a config change: the per-module and per-parameter hooks again, with new masks."""
        for h in self._attach_handles:
            h.remove()
        self._attach_handles = []
        self._params, self._param_mask, self._grad_params = [], 0, []
        if self._model is not None:
            self._attach_model(self._model)
        for extra, name in self._extra_models:
            self._attach_model(extra, name)
        for loss in self._loss_modules:
            self._attach_loss(loss)

    def _grad_hook(self, tname: str) -> Callable[[torch.Tensor], None] | None:
        gname = GRADIENT_PREFIX + tname
        gmask = self._mask_of(gname)
        return self._make_grad_hook(gname, gmask) if gmask else None

    def _forward_hook_for(self, module: torch.nn.Module, name: str, top: bool = False) -> Callable[..., None] | None:
        """A forward hook for `module` only if some saved collection can take its inputs/outputs:
        by name (include_regex), by module type (hook._members), or as the model's own."""
        in_p, out_p = f"{name}_input_", f"{name}_output_"
        in_bits, out_bits = members.type_bits(module, self._colls)
        image_bit = 0
        if top:
            in_bits |= members.bit_of(self._colls, members.MODEL_INPUTS)
            out_bits |= members.bit_of(self._colls, members.MODEL_OUTPUTS)
            image_bit = members.bit_of(self._colls, members.INPUT_IMAGE)
        wanted = in_bits or out_bits or image_bit or any(
            self._mask_of(p + i) for p in (in_p, out_p) for i in ("0", "1"))
        return self._make_forward_hook(in_p, out_p, in_bits, out_bits, image_bit) if wanted else None

    def _make_grad_hook(self, gname: str, gmask: int) -> Callable[[torch.Tensor], None]:
        def on_grad(grad: torch.Tensor) -> None:
            hit = gmask & self._active
            if hit:
                self._record(gname, grad, hit)

        return on_grad

    def _make_forward_hook(self, in_prefix: str, out_prefix: str, in_bits: int = 0, out_bits: int = 0,
                           image_bit: int = 0) -> Callable[..., None]:
        def on_forward(module: torch.nn.Module, inputs: Any, outputs: Any) -> None:
            if self._active:
                self._record_nested(in_prefix, inputs, in_bits, image_bit)
                self._record_nested(out_prefix, outputs, out_bits)

        return on_forward

    def _record_nested(self, prefix: str, value: Any, extra: int = 0, image_bit: int = 0) -> None:
        # extra: collections by type/role; image_bit: input_image, for a 4-D first tensor.
        if isinstance(value, torch.Tensor):
            idx = self._io_counts.get(prefix, 0)
            self._io_counts[prefix] = idx + 1
            name = prefix + str(idx)
            if unsaveable(name, value):
                return
            bits = self._mask_of(name) | extra
            if image_bit and idx == 0 and value.dim() == 4:
                bits |= image_bit
            hit = bits & self._active
            if hit:
                self._record(name, value, hit)
        elif isinstance(value, (tuple, list)):
            for v in value:
                self._record_nested(prefix, v, extra, image_bit)

    def _make_loss_hook(self, loss_name: str, lbits: int, pbits: int) -> Callable[..., None]:
        lname, pname = loss_name + members.LABELS_SUFFIX, loss_name + members.PREDICTIONS_SUFFIX

        def on_loss(module: torch.nn.Module, inputs: Any, outputs: Any) -> None:
            lhit, phit = lbits & self._active, pbits & self._active
            if not (lhit or phit):
                return
            labels, predictions = members.labels_and_predictions(module, inputs)
            if lhit and labels is not None:
                self._record_rows(lname, labels, lhit)
            if phit and predictions is not None:
                self._record_rows(pname, predictions, phit)

        return on_loss

    def _record_rows(self, name: str, tensor: torch.Tensor, mask: int) -> None:
        # A second call in one step (two losses of one class, micro-batches) appends its rows.
        prev = self._pending.get(name)
        if prev is not None and isinstance(prev[0], Snapshot) and prev[0].shape[1:] == tuple(tensor.shape[1:]):
            parts = prev[0].parts if isinstance(prev[0], Rows) else [prev[0]]
            self._pending[name] = (Rows([*parts, self._saver.snapshot(tensor)]), prev[1] | mask)
        else:
            self._record(name, tensor, mask)

    def _record(self, name: str, tensor: torch.Tensor, mask: int) -> None:
        # A snapshot (the optimizer updates weights in place): hook._copier.
        if unsaveable(name, tensor):
            return
        try:
            snap = self._saver.snapshot(tensor)
        except (RuntimeError, TypeError, NotImplementedError) as e:  # an exotic tensor subclass
            skipped(name, f"a {type(tensor).__name__} that cannot be copied ({str(e).splitlines()[0][:120]})")
            return
        self._put(name, snap, mask)

    def _snapshot(self, value: Any) -> Snapshot:
        """A private copy of a tensor (or numpy data, taken as it is) for the pending step."""
        return self._saver.snapshot(value)

    def _put(self, name: str, snap: Snapshot, mask: int) -> None:
        prev = self._pending.get(name)
        self._pending[name] = (snap, mask)
        if prev is not None and isinstance(prev[0], Snapshot) and prev[0] is not snap:
            prev[0].release()  # saved twice in one step: the last value wins, the first one's memory is free
