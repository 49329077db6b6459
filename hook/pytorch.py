"""The PyTorch hook: saves weights, gradients, module inputs/outputs and losses in smdebug's format.

Naming follows smdebug's PyTorch hook: parameters `<ModelClass>_<param name>`, gradients
`gradient/<ModelClass>_<param name>`, module tensors `<module path>_input_<i>` /
`<module path>_output_<i>` (the top module and loss modules use their class name). Besides
name regexes, some collections take tensors by module type or role (hook._members: ReLU/Tanh/
Sigmoid/Embedding modules, the model's inputs/outputs, `<LossClass>_labels`/`_predictions`).

Cost model: a step starts at each forward of the registered top module; there we decide, once,
a bitmask of the collections saved at this step. Every other hook tests that mask and returns at
once when it is 0. Which collections a tensor name belongs to is decided once per name (cached).
On saved steps the training thread only copies tensors to CPU; reductions, serialization and file
writes run on a background thread (hook._async_writer).
"""
from __future__ import annotations

import atexit
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hook import _members as members
from hook._async_writer import AsyncWriter
from hook._serialize import RAW_ONLY, CollectionsJob, EndMarkerJob, SavePlan, StepJob
from hook.config import (
    SCALAR_COLLECTIONS,
    TRAIN_ONLY_COLLECTIONS,
    CollectionConfig,
    HookConfig,
    ModeSaveConfig,
    Reduction,
)
from hook.errors import HookError
from trial.collection import Collection
from trial.modes import ModeKeys
from trial.writer import TrialWriter

logger = logging.getLogger(__name__)

GRADIENT_PREFIX = "gradient/"
SCALAR_PREFIX = "scalar/"


def _distributed() -> tuple[int, int]:
    """(rank, world size) from torch.distributed when initialized, else (0, 1)."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


class Hook:
    def __init__(self, config: HookConfig | None = None, *, out_dir: str | Path | None = None,
                 max_pending_steps: int = 16) -> None:
        self.config = config if config is not None else HookConfig.from_dict({})
        self.out_dir = Path(out_dir if out_dir is not None else self.config.local_path)
        self._max_pending = max_pending_steps
        self._colls: list[CollectionConfig] = list(self.config.collections_to_save())
        self._schedule: dict[ModeKeys, list[tuple[int, ModeSaveConfig]]] = {}
        self._build_schedule()
        self._tensor_names: dict[str, set[str]] = {c.name: set() for c in self.config.collections}
        self._mask_cache: dict[str, int] = {}
        self._plan_cache: dict[int, SavePlan] = {}
        self._explicit_names: dict[str, int] = {}  # save_tensor: name -> collection bits
        self.step = -1
        self.mode = ModeKeys.GLOBAL
        self.mode_steps: dict[ModeKeys, int] = {m: -1 for m in ModeKeys}
        self._mode_step = -1
        self._explicit_mode: ModeKeys | None = None
        self._active = 0
        self._pending: dict[str, tuple[torch.Tensor | np.ndarray, int]] = {}
        self._io_counts: dict[str, int] = {}
        self._seen: dict[str, int] = {}
        self._collections_dirty = True
        self._handles: list[Any] = []
        self._params: list[tuple[str, torch.nn.Parameter, int]] = []
        self._param_mask = 0
        self._model: torch.nn.Module | None = None
        self._loss_modules: list[torch.nn.Module] = []
        self._writer: AsyncWriter | None = None
        self._trial_writer: TrialWriter | None = None
        self._write_enabled = True
        self._num_workers = 1
        self._closed = False
        atexit.register(self._close_at_exit)

    # ------------------------------------------------------------------ construction
    @classmethod
    def create_from_json_file(cls, path: str | Path | None = None) -> Hook:
        """From debughookconfig.json (`$SMDEBUG_CONFIG_FILE_PATH` or SageMaker's path)."""
        return cls(HookConfig.from_json_file(path))

    def _build_schedule(self) -> None:
        # Per mode: (collection bit, its save config), without the collections that mode never
        # saves (gradients in EVAL/PREDICT); a step start then only does a few modulo tests.
        self._schedule = {
            mode: [(1 << bit, c.save_config.for_mode(mode)) for bit, c in enumerate(self._colls)
                   if not (mode in (ModeKeys.EVAL, ModeKeys.PREDICT) and c.name in TRAIN_ONLY_COLLECTIONS)]
            for mode in ModeKeys
        }

    # ------------------------------------------------------------------ registration
    def register_module(self, module: torch.nn.Module) -> None:
        if not isinstance(module, torch.nn.Module):
            raise HookError(f"register_module needs a torch.nn.Module, got {type(module).__name__}")
        if self._model is not None:
            raise HookError("a module is already registered with this hook")
        self._model = module
        cls_name = module._get_name()
        self._handles.append(module.register_forward_pre_hook(self._on_step_start))
        for pname, param in module.named_parameters():
            tname = f"{cls_name}_{pname}"
            mask = self._mask_of(tname)
            if mask:
                self._params.append((tname, param, mask))
                self._param_mask |= mask
            gname = GRADIENT_PREFIX + tname
            gmask = self._mask_of(gname)
            if gmask and param.requires_grad:
                self._handles.append(param.register_hook(self._make_grad_hook(gname, gmask)))
        for path, sub in module.named_modules():
            self._maybe_hook_module(sub, path or cls_name, top=sub is module)

    def register_loss(self, loss_module: torch.nn.Module) -> None:
        """Save the outputs of a loss module (`CrossEntropyLoss_output_0`)."""
        if not isinstance(loss_module, torch.nn.Module):
            raise HookError(f"register_loss needs a torch.nn.Module, got {type(loss_module).__name__}")
        if any(m is loss_module for m in self._loss_modules):
            return
        self._loss_modules.append(loss_module)
        name = loss_module._get_name()
        self._maybe_hook_module(loss_module, name)
        lbits = members.bit_of(self._colls, members.LABELS) | self._mask_of(name + members.LABELS_SUFFIX)
        pbits = members.bit_of(self._colls, members.PREDICTIONS) | self._mask_of(name + members.PREDICTIONS_SUFFIX)
        if lbits or pbits:
            self._handles.append(loss_module.register_forward_hook(self._make_loss_hook(name, lbits, pbits)))

    def _maybe_hook_module(self, module: torch.nn.Module, name: str, top: bool = False) -> None:
        """A forward hook on `module` only if some saved collection can take its inputs/outputs:
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
        if wanted:
            self._handles.append(module.register_forward_hook(
                self._make_forward_hook(in_p, out_p, in_bits, out_bits, image_bit)))

    # ------------------------------------------------------------------ modes and steps
    def set_mode(self, mode: ModeKeys) -> None:
        """Mode of the following steps; without it, TRAIN/EVAL is taken from `model.training`."""
        self._explicit_mode = ModeKeys(mode)

    def _on_step_start(self, module: torch.nn.Module, inputs: Any) -> None:
        if self._closed:
            return
        if self._pending:
            self._end_step()
        if self._io_counts:
            self._io_counts = {}
        mode = self._explicit_mode
        if mode is None:
            mode = ModeKeys.TRAIN if module.training else ModeKeys.EVAL
        self.step += 1
        self.mode = mode
        if mode == ModeKeys.GLOBAL:
            mode_step = self.step
        else:
            mode_step = self.mode_steps[mode] + 1
            self.mode_steps[mode] = mode_step
        self.mode_steps[ModeKeys.GLOBAL] = self.step
        self._mode_step = mode_step
        active = 0
        for bit, sc in self._schedule[mode]:
            if sc.should_save(mode_step):
                active |= bit
        self._active = active
        if active & self._param_mask:
            # Weights as they enter this step's forward (the optimizer later updates them in place).
            for tname, param, mask in self._params:
                if mask & active:
                    self._record(tname, param, mask & active)

    # ------------------------------------------------------------------ torch callbacks
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
        if prev is not None and isinstance(prev[0], torch.Tensor) and prev[0].shape[1:] == tensor.shape[1:]:
            self._pending[name] = (torch.cat([prev[0], tensor.detach().to("cpu")]), prev[1] | mask)
        else:
            self._record(name, tensor, mask)

    def _record(self, name: str, tensor: torch.Tensor, mask: int) -> None:
        # A copy (the optimizer updates weights in place); on CPU, clone() is the cheaper copy.
        t = tensor.detach()
        self._pending[name] = (t.clone() if t.device.type == "cpu" else t.to("cpu"), mask)

    # ------------------------------------------------------------------ explicit API
    def save_scalar(self, name: str, value: Any) -> None:
        """Save `scalar/<name>` at the current step (whatever the save config, as smdebug)."""
        arr = value.detach().to("cpu", copy=True) if isinstance(value, torch.Tensor) else np.asarray(value)
        if int(np.prod(arr.shape)) != 1:
            raise HookError(f"save_scalar({name!r}) needs a single value, got shape {tuple(arr.shape)}")
        self._pending[SCALAR_PREFIX + name] = (arr.reshape(()), 0)

    def save_tensor(self, name: str, tensor: Any, collections_to_write: str | list[str] = "default") -> None:
        """Save `name` in the given collections (created if unknown) when they are saved this step."""
        names = [collections_to_write] if isinstance(collections_to_write, str) else list(collections_to_write)
        bits = 0
        for cname in names:
            bits |= self._collection_bit(cname)
        self._explicit_names[name] = self._explicit_names.get(name, 0) | bits
        self._mask_cache.pop(name, None)
        hit = self._mask_of(name) & self._active
        if hit and self.step >= 0:
            value = tensor if isinstance(tensor, torch.Tensor) else torch.as_tensor(np.asarray(tensor))
            self._record(name, value, hit)

    def _collection_bit(self, cname: str) -> int:
        for bit, coll in enumerate(self._colls):
            if coll.name == cname:
                return 1 << bit
        known = {c.name: c for c in self.config.collections}
        coll = known.get(cname) or CollectionConfig(cname, (), self.config.save_config,
                                                    self.config.reduction_config)
        self._colls.append(coll)
        self._build_schedule()
        self._tensor_names.setdefault(cname, set())
        self._mask_cache.clear()
        self._plan_cache.clear()
        bit = 1 << (len(self._colls) - 1)
        if self.step >= 0 and coll.should_save(self.mode, self._mode_step):
            self._active |= bit
        self._collections_dirty = True
        return bit

    # ------------------------------------------------------------------ membership and plans
    def _mask_of(self, name: str) -> int:
        mask = self._mask_cache.get(name)
        if mask is None:
            mask = self._explicit_names.get(name, 0)
            for bit, coll in enumerate(self._colls):
                if coll.matches(name):
                    mask |= 1 << bit
            self._mask_cache[name] = mask
        return mask

    def _plan(self, mask: int) -> SavePlan:
        plan = self._plan_cache.get(mask)
        if plan is None:
            reds: list[Reduction] = []
            raw = shape = False
            for bit, coll in enumerate(self._colls):
                if mask & (1 << bit):
                    rc = coll.reduction_config
                    raw |= rc.save_raw_tensor
                    shape |= rc.save_shape
                    if coll.name not in SCALAR_COLLECTIONS:
                        reds += [r for r in rc.reductions if r not in reds]
            plan = SavePlan(tuple(reds), raw, shape)
            self._plan_cache[mask] = plan
        return plan

    # ------------------------------------------------------------------ writing
    def _ensure_writer(self) -> AsyncWriter:
        if self._writer is None:
            rank, world = _distributed()
            if self.config.include_workers == "all":
                self._num_workers = world
            else:  # smdebug's include_workers="one": only rank 0 writes, the trial has one worker
                self._num_workers, self._write_enabled = 1, rank == 0
            self._trial_writer = TrialWriter(self.out_dir, f"worker_{rank}")
            self._writer = AsyncWriter(self._max_pending)
        return self._writer

    def _end_step(self) -> None:
        pending, self._pending = self._pending, {}
        self._io_counts = {}
        if not pending or self.step < 0:
            self._pending = pending  # before the first step: carried into step 0
            return
        writer = self._ensure_writer()
        if not self._write_enabled:
            return
        items = []
        for name, (value, mask) in pending.items():
            items.append((name, value, self._plan(mask) if mask else RAW_ONLY))
            if self._seen.get(name, 0) | mask != self._seen.get(name, 0):
                self._seen[name] = self._seen.get(name, 0) | mask
                for bit, coll in enumerate(self._colls):
                    if mask & (1 << bit):
                        self._tensor_names[coll.name].add(name)
                self._collections_dirty = True
        assert self._trial_writer is not None
        writer.submit(StepJob(self._trial_writer, self.step, self.mode, self._mode_step, tuple(items)))
        if self._collections_dirty:
            self._submit_collections()

    def _submit_collections(self) -> None:
        writer = self._ensure_writer()
        if not self._write_enabled:
            return
        assert self._trial_writer is not None
        colls = {c.name: c for c in self.config.collections}
        colls.update({c.name: c for c in self._colls})
        objs = tuple(Collection.from_dict(c.to_dict(sorted(self._tensor_names.get(n, ()))))
                     for n, c in colls.items())
        writer.submit(CollectionsJob(self._trial_writer, objs, self._num_workers))
        self._collections_dirty = False

    def close(self) -> None:
        """Write what is pending, the collections file and the end marker; stop the writer.
        Raises HookWriteError if any write failed. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for h in self._handles:
            h.remove()
        self._handles.clear()
        atexit.unregister(self._close_at_exit)
        if self._pending and self.step < 0:
            self.step, self.mode, self._mode_step = 0, ModeKeys.GLOBAL, 0
        self._end_step()
        writer = self._ensure_writer()
        if self._write_enabled:
            self._submit_collections()
            assert self._trial_writer is not None
            writer.submit(EndMarkerJob(self._trial_writer))
        writer.close()

    def _close_at_exit(self) -> None:
        try:
            self.close()
        except HookError as e:
            logger.error("sdlocal hook: %s", e)
