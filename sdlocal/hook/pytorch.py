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

This module holds the hook's construction, its steps and its explicit API; the rest of `Hook` is
in three parts (hook/_pytorch_state.py: its state and collection membership; _pytorch_attach.py:
the torch callbacks; _pytorch_writing.py: to the writer, closing, hand-over).
"""
from __future__ import annotations

import atexit
import logging
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sdlocal.hook import _current, _tensorboard, _timeline, records
from sdlocal.hook._copier import Ready
from sdlocal.hook._job_paths import job_path
from sdlocal.hook._pytorch_attach import Attaching
from sdlocal.hook._pytorch_state import SCALAR_PREFIX, TrialWriterFactory, rank_and_world
from sdlocal.hook._pytorch_writing import Writing
from sdlocal.hook._saving import SaveOptions, Saver
from sdlocal.hook._serialize import (
    SavePlan,
)
from sdlocal.hook._tensorboard import TensorBoardWriter
from sdlocal.hook.config import (
    TRAIN_ONLY_COLLECTIONS,
    CollectionConfig,
    HookConfig,
    ModeSaveConfig,
)
from sdlocal.hook.errors import HookError
from sdlocal.hook.step_record import StepRecord
from sdlocal.trial.modes import ModeKeys
from sdlocal.trial.writer import TrialWriter

logger = logging.getLogger(__name__)


class Hook(Attaching, Writing):
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
            self._records = records.for_config(self.config, self.out_dir, lambda: rank_and_world()[0])
            if self._records is not None:
                self._records.attach(module)
        self._attach_model(module)
        if self._timeline is not None:
            self._timeline_handle = module.register_forward_hook(self._timeline.forward_end)

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
