"""The PyTorch hook: saves weights, gradients, module inputs/outputs and losses in smdebug's format.

Naming follows smdebug's PyTorch hook: parameters `<ModelClass>_<param name>`, gradients
`gradient/<ModelClass>_<param name>`, module tensors `<module path>_input_<i>` /
`<module path>_output_<i>` (the top module and loss modules use their class name). Besides
name regexes, some collections take tensors by module type or role (hook._members: ReLU/Tanh/
Sigmoid/Embedding modules, the model's inputs/outputs, `<LossClass>_labels`/`_predictions`).

Cost model: a step starts at each forward of the registered top module; there we decide, once,
a bitmask of the collections saved at this step. Every other hook tests that mask and returns at
once when it is 0. Which collections a tensor name belongs to is decided once per name (cached).
On saved steps the training thread only takes snapshots (hook._copier: CPU tensors copied into
reused buffers; CUDA tensors cloned on the device and copied to pinned host buffers on a copy
stream, hook._cuda_copy, without synchronizing); reductions, serialization and file writes run on
a background thread (hook._async_writer). The copies' memory is bounded in bytes (hook._saving,
`SaveOptions.queue_bytes`, `SDLOCAL_HOOK_QUEUE_BYTES`): when the disk cannot keep up the training
waits for the writer, and the hook logs the total wait when it closes.

The framework timeline (hook._timeline), when the job's profiler config enables it: the step
pre-hook starts its steps (in our step's mode), a forward hook on the model ends
each forward. `close()` closes its files too.

One hook per job (hook._current): each hook becomes the process's current hook; the zero-code hook
(`auto=True`) hands over to a hook the script creates, and one directory has one writer.
`_forward_hook_for` / `_grad_hook` are where a subclass (smdebug.pytorch.Hook) plugs in its own
module and gradient callbacks.
"""
from __future__ import annotations

import atexit
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sdlocal.hook import _current, _tensorboard, _timeline, records
from sdlocal.hook import _members as members
from sdlocal.hook._copier import Ready, Rows, Snapshot
from sdlocal.hook._job_paths import job_path
from sdlocal.hook._saving import SaveOptions, Saver
from sdlocal.hook._serialize import (
    RAW_ONLY,
    Batch,
    CloseJob,
    CollectionsJob,
    EndMarkerJob,
    SavePlan,
    StepJob,
    TensorBoardJob,
)
from sdlocal.hook._step_record import StepRecord, write_record
from sdlocal.hook._tensorboard import TensorBoardWriter
from sdlocal.hook._unsaveable import skipped, unsaveable
from sdlocal.hook.config import (
    SCALAR_COLLECTIONS,
    TRAIN_ONLY_COLLECTIONS,
    CollectionConfig,
    HookConfig,
    ModeSaveConfig,
    Reduction,
)
from sdlocal.hook.errors import HookError
from sdlocal.trial.collection import Collection
from sdlocal.trial.modes import ModeKeys
from sdlocal.trial.writer import TrialWriter

TrialWriterFactory = Callable[[Path, str], TrialWriter]

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
    # `<Loss>_labels` / `_predictions` also for a collection whose regex names them (smdebug's
    # API hook: only for the labels / predictions collections, smdebug has no such tensors)
    ROLE_TENSORS_BY_NAME = True

    def __init__(self, config: HookConfig | None = None, *, out_dir: str | Path | None = None,
                 max_pending_steps: int = 16, dry_run: bool = False, auto: bool = False,
                 tensorboard_dir: str | Path | None = None, tensorboard_from_job: bool = True,
                 save_options: SaveOptions | None = None, trial_writer: TrialWriterFactory | None = None) -> None:
        self.config = config if config is not None else HookConfig.from_dict({})
        # a SageMaker container path (/opt/ml/...) is the job's folder (hook._job_paths)
        self.out_dir = Path(job_path(out_dir if out_dir is not None else self.config.local_path))
        # TensorBoard: the given folder, else (tensorboard_from_job) the job's TensorBoardOutputConfig
        # or the hook config's export_tensorboard/tensorboard_dir (hook._tensorboard.job_dir).
        if tensorboard_dir is None and tensorboard_from_job:
            tensorboard_dir = _tensorboard.job_dir(self.config.tensorboard_dir)
        self._tb_dir = Path(job_path(tensorboard_dir)) if tensorboard_dir is not None else None
        self._tb: TensorBoardWriter | None = None
        self.auto = auto  # the zero-code hook of `python -m sdlocal.hook.run`: hands over to a script's hook
        # save_options: the copies' byte limit and the asynchronous/synchronous path (hook._saving);
        # trial_writer: makes the TrialWriter of (folder, worker) (tests: a slow one)
        self._saver = Saver(save_options if save_options is not None else SaveOptions.from_env(), max_pending_steps)
        self._make_trial_writer: TrialWriterFactory = trial_writer if trial_writer is not None else TrialWriter
        self._colls: list[CollectionConfig] = []
        self._schedule: dict[ModeKeys, list[tuple[int, ModeSaveConfig]]] = {}
        self._tensor_names: dict[str, set[str]] = {}
        self._inherited: dict[str, CollectionConfig] = {}  # collections of a hook we took over from
        self._mask_cache: dict[str, int] = {}
        self._plan_cache: dict[int, SavePlan] = {}
        self._explicit_names: dict[str, int] = {}  # save_tensor: name -> collection bits
        self._use_config(self.config)
        self.step = -1
        self.mode = ModeKeys.GLOBAL
        self.mode_steps: dict[ModeKeys, int] = {m: -1 for m in ModeKeys}
        self.last_saved_step: int | None = None
        self._mode_step = -1
        self._started = False  # a step of ours has begun (data saved before goes into the first)
        self._explicit_mode: ModeKeys | None = None
        self._active = 0
        # name -> (snapshot, collection mask); a raw CPU tensor/array is accepted too (smdebug's API layer)
        self._pending: dict[str, tuple[Any, int]] = {}
        self._io_counts: dict[str, int] = {}
        self._seen: dict[str, int] = {}
        self._collections_dirty = True
        self._step_handle: Any = None
        self._attach_handles: list[Any] = []
        self._params: list[tuple[str, torch.nn.Parameter, int]] = []
        self._param_mask = 0
        self._model: torch.nn.Module | None = None
        # Framework integrations (hook/frameworks): more modules watched (watch_module), TRAIN steps
        # started by the trainer's loop (begin_step) and gradients read when final (final_gradients).
        self._extra_models: list[tuple[torch.nn.Module, str]] = []
        self._grad_params: list[tuple[str, torch.nn.Parameter, int]] = []
        self.external_steps: frozenset[ModeKeys] = frozenset()
        self.final_gradients_only = False
        self._loss_modules: list[torch.nn.Module] = []
        self._writer_started = False
        self._trial_writer: TrialWriter | None = None
        self._write_enabled = not dry_run
        self._num_workers = 1
        self._closed = False
        self.handed_over = False
        self._steps = StepRecord()  # steps seen, and per collection the steps it was scheduled at
        # The framework timeline (hook._timeline), when the job's profiler config enables it.
        self._timeline = _timeline.current()
        self._timeline_handle: Any = None
        self._records: records.Recorder | None = None  # sdlocal's training records (hook/records.py)
        self._model_name = ""
        atexit.register(self._close_at_exit)
        _current.install(self)

    @property
    def closed(self) -> bool:
        return self._closed

    # ------------------------------------------------------------------ construction
    @classmethod
    def create_from_json_file(cls, path: str | Path | None = None) -> Hook:
        """From debughookconfig.json (`$SMDEBUG_CONFIG_FILE_PATH` or SageMaker's path)."""
        return cls(HookConfig.from_json_file(path))

    def _use_config(self, config: HookConfig) -> None:
        """(Re)build everything derived from the config. Mask bits change: callers re-attach."""
        self.config = config
        self._colls = list(config.collections_to_save())
        for c in config.collections:
            self._tensor_names.setdefault(c.name, set())
        # Per mode: (collection bit, its save config), without the collections that mode never
        # saves (gradients in EVAL/PREDICT); a step start then only does a few modulo tests.
        self._schedule = {
            mode: [(1 << bit, c.save_config.for_mode(mode)) for bit, c in enumerate(self._colls)
                   if not (mode in (ModeKeys.EVAL, ModeKeys.PREDICT) and c.name in TRAIN_ONLY_COLLECTIONS)]
            for mode in ModeKeys
        }
        self._mask_cache.clear()
        self._plan_cache.clear()
        self._explicit_names.clear()
        self._seen = {}
        self._collections_dirty = True

    # ------------------------------------------------------------------ registration
    def register_module(self, module: torch.nn.Module) -> None:
        if not isinstance(module, torch.nn.Module):
            raise HookError(f"register_module needs a torch.nn.Module, got {type(module).__name__}")
        if self._closed:
            raise HookError("register_module: this hook is closed")
        if self._model is module:
            return  # registered twice (e.g. once per epoch): once is enough
        if self._model is not None:
            raise HookError(f"a module ({self._model._get_name()}) is already registered with this hook; "
                            "one hook follows one model")
        self._model = module
        self._model_name = module._get_name()
        self._step_handle = module.register_forward_pre_hook(self._on_step_start)
        self._params, self._param_mask, self._grad_params = [], 0, []
        if self._write_enabled:
            self._records = records.for_config(self.config, self.out_dir, lambda: _distributed()[0])
            if self._records is not None:
                self._records.attach(module)
        self._attach_model(module)
        if self._timeline is not None:
            self._timeline_handle = module.register_forward_hook(self._timeline.forward_end)

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

    # ------------------------------------------------------------------ modes and steps
    def set_mode(self, mode: ModeKeys) -> None:
        """Mode of the following steps; without it, TRAIN/EVAL is taken from `model.training`."""
        self._explicit_mode = ModeKeys(mode)

    def _on_step_start(self, module: torch.nn.Module, inputs: Any) -> None:
        if self._closed:
            return
        mode = self._explicit_mode
        if mode is None:
            mode = ModeKeys.TRAIN if module.training else ModeKeys.EVAL
        if mode in self.external_steps:
            return  # a trainer's loop starts these steps (begin_step)
        self.begin_step(mode, module, inputs)

    def begin_step(self, mode: ModeKeys, module: torch.nn.Module | None = None, inputs: Any = None) -> None:
        """Start a step of `mode` (what the model's forward does, unless a framework integration
        drives this mode's steps from its trainer's loop: hook/frameworks)."""
        if self._closed:
            return
        if self._pending:
            self._end_step()
        if self._io_counts:
            self._io_counts = {}
        self.step += 1
        self._started = True
        self.mode = mode
        if mode == ModeKeys.GLOBAL:
            mode_step = self.step
        else:
            mode_step = self.mode_steps[mode] + 1
            self.mode_steps[mode] = mode_step
        self.mode_steps[ModeKeys.GLOBAL] = self.step
        self._mode_step = mode_step
        if self._timeline is not None:
            self._timeline.step_start(mode, self._model_name)
        active = 0
        for bit, sc in self._schedule[mode]:
            if sc.should_save(mode_step):
                active |= bit
        self._active = active
        self._steps.step(active)
        watched = module if module is not None else self._model
        if self._records is not None and watched is not None:  # a trainer's step: its batches come at its forwards
            self._records.on_step_start(self.step, mode, mode_step, watched, inputs)
        if active & self._param_mask:
            # Weights as they enter this step's forward (the optimizer later updates them in place).
            for tname, param, mask in self._params:
                if mask & active:
                    self._record(tname, param, mask & active)

    def pause(self) -> None:
        """Save nothing until the next step (a trainer's sanity check): the pending step is written."""
        if self._pending:
            self._end_step()
        self._active = 0

    def save_final_gradients(self) -> None:
        """Save the gradients as they are now (`param.grad`: accumulated, unscaled, clipped), when
        this step saves gradients; for a trainer's callback right before its optimizer step."""
        active = self._active
        if not active or self._closed:
            return
        for gname, param, gmask in self._grad_params:
            hit = gmask & active
            if hit and param.grad is not None:
                self._record(gname, param.grad, hit)

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

    # ------------------------------------------------------------------ explicit API
    def save_scalar(self, name: str, value: Any) -> None:
        """Save `scalar/<name>` at the current step (whatever the save config, as smdebug)."""
        if self._closed:
            logger.warning("save_scalar(%r) after the hook was closed: not saved", name)
            return
        if isinstance(value, torch.Tensor):
            if value.numel() != 1:
                raise HookError(f"save_scalar({name!r}) needs a single value, got shape {tuple(value.shape)}")
            snap = self._snapshot(value.detach().reshape(()))
        else:
            arr = np.asarray(value)
            if int(np.prod(arr.shape)) != 1:
                raise HookError(f"save_scalar({name!r}) needs a single value, got shape {tuple(arr.shape)}")
            snap = Ready(arr.reshape(()))
        self._put(SCALAR_PREFIX + name, snap, 0)

    def save_tensor(self, name: str, tensor: Any, collections_to_write: str | list[str] = "default") -> None:
        """Save `name` in the given collections (created if unknown) when they are saved this step;
        before the first step: in the first step."""
        if self._closed:
            logger.warning("save_tensor(%r) after the hook was closed: not saved", name)
            return
        names = [collections_to_write] if isinstance(collections_to_write, str) else list(collections_to_write)
        bits = 0
        for cname in names:
            bits |= self._collection_bit(cname)
        self._explicit_names[name] = self._explicit_names.get(name, 0) | bits
        self._mask_cache.pop(name, None)
        mask = self._mask_of(name)
        hit = mask & self._active if self._started else mask
        if hit:
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
        bit = 1 << (len(self._colls) - 1)
        for mode, entries in self._schedule.items():
            if not (mode in (ModeKeys.EVAL, ModeKeys.PREDICT) and cname in TRAIN_ONLY_COLLECTIONS):
                entries.append((bit, coll.save_config.for_mode(mode)))
        self._tensor_names.setdefault(cname, set())
        self._mask_cache.clear()
        self._plan_cache.clear()
        if self._started and coll.should_save(self.mode, self._mode_step):
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
    def _ensure_writer(self) -> Saver:
        if not self._writer_started:
            self._writer_started = True
            rank, world = _distributed()
            if self.config.include_workers == "all":
                self._num_workers = world
            elif rank != 0:  # smdebug's include_workers="one": only rank 0 writes, the trial has one worker
                self._write_enabled = False
            if self._write_enabled and not _current.claim(self.out_dir, self):
                self._write_enabled = False
                logger.warning("sdlocal hook: another hook of this process already writes to %s; this one "
                               "writes nothing (one hook writes per folder)", self.out_dir)
            self._trial_writer = self._make_trial_writer(self.out_dir, f"worker_{rank}")
            if self._write_enabled and self._tb_dir is not None:
                self._tb = TensorBoardWriter(self._tb_dir, f"worker_{rank}")
        return self._saver

    def _end_step(self) -> None:
        pending, self._pending = self._pending, {}
        self._io_counts = {}
        if not pending or not self._started:
            self._pending = pending  # before our first step: carried into it
            return
        writer = self._ensure_writer()
        snaps = {name: (value if isinstance(value, Snapshot) else Ready(value), mask)
                 for name, (value, mask) in pending.items()}
        if not self._write_enabled:
            for snap, _ in snaps.values():
                snap.release()
            return
        items = []
        saved = 0  # the collections this step saved a tensor of (the step record)
        for name, (snap, mask) in snaps.items():
            saved |= mask
            items.append((name, snap, self._plan(mask) if mask else RAW_ONLY))
            if self._seen.get(name, 0) | mask != self._seen.get(name, 0):
                self._seen[name] = self._seen.get(name, 0) | mask
                for bit, coll in enumerate(self._colls):
                    if mask & (1 << bit):
                        self._tensor_names.setdefault(coll.name, set()).add(name)
                self._collections_dirty = True
        self._steps.saved(saved)
        assert self._trial_writer is not None
        job: Callable[[], None] = StepJob(self._trial_writer, self.step, self.mode, self._mode_step, tuple(items))
        if self._tb is not None:
            job = Batch((job, self._tensorboard_job(snaps)))
        writer.submit(job, [snap for snap, _ in snaps.values()])
        self.last_saved_step = self.step
        if self._collections_dirty:
            self._submit_collections()

    def _tensorboard_job(self, snaps: dict[str, tuple[Snapshot, int]]) -> TensorBoardJob:
        """Scalars (single values: losses, metrics, save_scalar) and histograms (tensors of
        collections with save_histogram: weights, gradients, ...) of this step, for TensorBoard."""
        scalars, histograms = [], []
        for name, (snap, mask) in snaps.items():
            if int(np.prod(snap.shape)) == 1:
                scalars.append((name, snap))
            elif any(mask & (1 << bit) and coll.save_histogram for bit, coll in enumerate(self._colls)):
                histograms.append((name, snap))
        prefix = "" if self.mode == ModeKeys.GLOBAL else f"{self.mode.name.lower()}/"
        assert self._tb is not None
        return TensorBoardJob(self._tb, self.step, prefix, tuple(scalars), tuple(histograms))

    def _submit_collections(self) -> None:
        writer = self._ensure_writer()
        if not self._write_enabled:
            return
        assert self._trial_writer is not None
        colls = dict(self._inherited)
        colls.update({c.name: c for c in self.config.collections})
        colls.update({c.name: c for c in self._colls})
        objs = tuple(Collection.from_dict(c.to_dict(sorted(self._tensor_names.get(n, ()))))
                     for n, c in colls.items())
        writer.submit(CollectionsJob(self._trial_writer, objs, self._num_workers))
        self._collections_dirty = False

    def _remove_handles(self) -> None:
        for h in [self._step_handle, self._timeline_handle, *self._attach_handles]:
            if h is not None:
                h.remove()
        self._step_handle, self._timeline_handle, self._attach_handles = None, None, []
        if self._records is not None:
            self._records.close()
        atexit.unregister(self._close_at_exit)

    def close(self) -> None:
        """Write what is pending, the collections file and the end marker; stop the writer.
        Raises HookWriteError if any write failed. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._remove_handles()
        try:
            if self._pending and not self._started:  # saved before any step: that is one step
                self.step += 1
                self._started = True
                self.mode, self._mode_step = ModeKeys.GLOBAL, self.step
            self._end_step()
            writer = self._ensure_writer()
            if self._write_enabled:
                self._submit_collections()
                assert self._trial_writer is not None
                writer.submit(EndMarkerJob(self._trial_writer))
            if self._tb is not None:
                writer.submit(CloseJob(self._tb))
            writer.close()
            if self._write_enabled:
                self._write_step_record()
        finally:
            _current.release(self.out_dir, self)
            if self._timeline is not None:
                self._timeline.close()  # the timeline's files get their final names too

    def _write_step_record(self) -> None:
        modes = {m.name: n + 1 for m, n in self.mode_steps.items() if n >= 0 and m != ModeKeys.GLOBAL}
        try:
            names = [c.name for c in self._colls]
            write_record(self.out_dir, self.step + 1, modes, self._steps.scheduled(names), self._steps.saved_steps(names))
        except OSError as e:  # only a warning is lost (the launcher's steps-to-judge check)
            logger.warning("sdlocal hook: cannot write the step record in %s: %s", self.out_dir, e)

    def _hand_over_to(self, new: Hook) -> None:
        """The zero-code hook stops for `new`, the hook the script created: it writes its current
        step and collections (no end marker when `new` writes to the same folder) and `new`
        continues its step count there, so no file is lost or overwritten."""
        same = _current.same_dir(self.out_dir, new.out_dir)
        self._closed = self.handed_over = True
        self._remove_handles()
        try:
            if self._started and self._pending:
                self._end_step()
            if self._writer_started:
                if self._write_enabled:
                    self._submit_collections()
                    if not same:
                        assert self._trial_writer is not None
                        self._saver.submit(EndMarkerJob(self._trial_writer))
                if self._tb is not None:
                    self._saver.submit(CloseJob(self._tb))
                self._saver.close()
        except HookError as e:
            logger.error("sdlocal hook: the zero-code hook failed to write: %s", e)
        finally:
            _current.release(self.out_dir, self)
        logger.info("sdlocal hook: the script's own hook takes over from the zero-code hook after step %d",
                    self.step)
        if same:
            new._continue_from(self)

    def _continue_from(self, previous: Hook) -> None:
        self.step = previous.step
        self._steps.carried.update(previous._steps.scheduled(c.name for c in previous._colls))
        self._steps.carried_saved.update(previous._steps.saved_steps(c.name for c in previous._colls))
        self.mode_steps = dict(previous.mode_steps)
        self.last_saved_step = previous.last_saved_step
        own = {c.name for c in self.config.collections}
        for c in (*previous.config.collections, *previous._colls):
            if c.name not in own:
                self._inherited[c.name] = c
        for name, names in previous._tensor_names.items():
            self._tensor_names.setdefault(name, set()).update(names)
        self._collections_dirty = True

    def _close_at_exit(self) -> None:
        try:
            self.close()
        except HookError as e:
            logger.error("sdlocal hook: %s", e)
