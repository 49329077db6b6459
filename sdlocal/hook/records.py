"""The hook's training records (format: sdlocal.trial.records): what the rules beyond Debugger need
and tensors cannot show, observed cheaply while the model trains.

On every step (a few attribute reads): whether a forward without autograd runs a model in training
mode that has dropout or batch norm (an evaluation in training mode), and a fingerprint of the
training batch (blake2b of at most 4 Ki elements sampled across the model's first input, CPU
tensors only) with each optimizer's step count so far. On every optimizer step (a global post-hook):
a count per optimizer, and which parameters each holds. On the recorded steps (the `sdlocal_records`
collection's schedule): the norm of every parameter and floating buffer (one `torch._foreach_norm`
each: per-worker checksums that cost little whatever `include_workers`). Gradient resets, judged
per optimizer: an optimizer step taken during a recorded training step opens a window for each
checked parameter it holds (up to three of the model's), which that optimizer's next step closes;
a tensor hook (run before autograd accumulates into `.grad`) notes whether some backward in the
window found the parameter's gradient reset (None or zero). A window whose backwards all found
gradients left is a step on unreset gradients for that optimizer; a GAN's generator backward,
which fills the discriminator's gradients after the discriminator's step, is followed by the
discriminator's `zero_grad` before its next step and counts as reset. Parameters registered on the
model while it runs without autograd or in eval mode (a lazily built module first run by an
evaluation) are noted.

Lines are kept in memory and written as one records file every `FLUSH_S` seconds and at close.
"""
from __future__ import annotations

import hashlib
import logging
import os
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.optim.optimizer as _optim
from torch.nn.parameter import is_lazy

from sdlocal.hook.config import SaveConfig
from sdlocal.trial.modes import ModeKeys
from sdlocal.trial.records import RECORDS_COLLECTION, write_chunk

logger = logging.getLogger(__name__)

FLUSH_S = 2.0
FINGERPRINT_ELEMENTS = 4096
_MODE_LAYERS = (torch.nn.modules.dropout._DropoutNd, torch.nn.modules.batchnorm._NormBase)


def fingerprint(value: Any) -> str | None:
    """A short hash of a CPU tensor (or the first tensor of a tuple/list/dict), None otherwise: its
    shape and `FINGERPRINT_ELEMENTS` elements sampled evenly across it (tens of microseconds)."""
    if isinstance(value, (tuple, list)):
        value = next((v for v in value if isinstance(v, torch.Tensor)), None)
    elif isinstance(value, dict):
        value = next((v for v in value.values() if isinstance(v, torch.Tensor)), None)
    if not isinstance(value, torch.Tensor) or value.device.type != "cpu" or value.numel() == 0:
        return None
    flat = value.detach().reshape(-1)
    sample = flat[::max(1, flat.numel() // FINGERPRINT_ELEMENTS)].contiguous()
    if sample.dtype == torch.bool:
        sample = sample.to(torch.uint8)
    h = hashlib.blake2b(repr(tuple(value.shape)).encode(), digest_size=8)
    h.update(sample.view(torch.uint8).numpy().tobytes())  # a few hundred bytes
    return h.hexdigest()


def _ndim(param: torch.Tensor) -> int:
    try:
        return param.dim()
    except RuntimeError:  # an uninitialized (lazy) parameter
        return -1


def _norms(tensors: list[torch.Tensor]) -> list[float]:
    if not tensors:
        return []
    floats = [torch.zeros(()) if is_lazy(t) else t.detach() for t in tensors]
    return [float(x) for x in torch.stack(torch._foreach_norm(floats)).double().tolist()]


class Recorder:
    """Records of one hook's model; `out_dir` is the trial folder, `schedule` the records' save
    config, `rank` a callable giving this process's rank when the first file is written."""

    def __init__(self, out_dir: Path, schedule: SaveConfig, rank: Callable[[], int]) -> None:
        self.out_dir = out_dir
        self.schedule = schedule
        self._rank = rank
        self._worker: str | None = None
        self._model: torch.nn.Module | None = None
        self._has_mode_layers = False
        self._handles: list[Any] = []
        self._lines: list[dict[str, Any]] = []
        self._first_step = 0
        self._last_flush = time.monotonic()
        self._params: list[tuple[str, torch.nn.Parameter]] = []
        self._buffers: list[tuple[str, torch.Tensor]] = []
        self._layout_key: Any = None
        self._dirty = True
        # id -> optimizer, held only as long as the job holds it
        self._optimizers: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
        self._opt_steps = 0
        self._opt_index: dict[int, int] = {}  # id of an optimizer -> its index (order of its first step)
        self._opt_counts: list[int] = []  # steps of each optimizer
        self._checked: list[torch.nn.Parameter] = []  # the parameters whose gradient resets are checked
        self._checked_of: dict[int, tuple[tuple[int, ...], list[int]]] = {}  # optimizer id -> (groups' sizes, checked held)
        # (checked parameter, optimizer index) -> None (no backward yet), True (a backward found the
        # gradient reset), False (backwards found it left): the windows open between two steps
        self._windows: dict[tuple[int, int], bool | None] = {}
        self._armed = False
        self._stale = [0, 0]  # optimizer steps checked, on gradients not reset since that optimizer's previous step
        self._stale_by_opt: list[list[int]] = []  # the same per optimizer
        self._eval_train_forwards = 0
        self._eval_forwards = 0
        self._opt_at_last_eval_train = -1
        self._new_in_eval: list[str] = []
        self._pending_new: list[tuple[int, bool]] = []  # (id of a parameter registered, during an eval)
        self._batches: list[tuple[int, str, list[int]]] = []  # (step, fingerprint, each optimizer's steps)
        self._step = -1
        self._mode = ModeKeys.GLOBAL
        self._batch_taken = False  # this forward's batch was taken at its step start
        self._closed = False

    # ------------------------------------------------------------------ attachment
    def attach(self, model: torch.nn.Module) -> None:
        self._model = model
        self._has_mode_layers = any(isinstance(m, _MODE_LAYERS) for m in model.modules())
        self._handles.append(_optim.register_optimizer_step_post_hook(self._on_optimizer_step))
        # after the hook's step-start pre-hook (registered first): the batches of steps a trainer starts
        self._handles.append(model.register_forward_pre_hook(self._on_forward, with_kwargs=True))
        self._handles.append(torch.nn.modules.module.register_module_parameter_registration_hook(
            self._on_parameter_registered))
        self._hook_gradients()

    def _hook_gradients(self) -> None:
        assert self._model is not None
        trainable = [p for p in self._model.parameters() if p.requires_grad]
        if not trainable:
            return
        chosen = {id(p): p for p in (trainable[0], trainable[-1], min(trainable, key=lambda p: p.numel()))}
        self._checked = list(chosen.values())
        for i, p in enumerate(self._checked):
            self._handles.append(p.register_hook(self._make_grad_check(i, p)))

    def _make_grad_check(self, index: int, param: torch.nn.Parameter) -> Callable[[torch.Tensor], None]:
        def check(grad: torch.Tensor) -> None:
            keys = [k for k, reset in self._windows.items() if k[0] == index and reset is not True]
            if not keys:
                return  # no window open for it, or the reset already seen
            old = param.grad
            reset = old is None or not bool(old.detach().ne(0).any())
            for k in keys:
                self._windows[k] = reset
        return check

    def _held_checked(self, optimizer: Any) -> list[int]:
        """The checked parameters `optimizer` holds (recomputed when its groups change size)."""
        groups = tuple(len(g["params"]) for g in optimizer.param_groups)
        cached = self._checked_of.get(id(optimizer))
        if cached is None or cached[0] != groups:
            ids = {id(p) for g in optimizer.param_groups for p in g["params"]}
            cached = self._checked_of[id(optimizer)] = (groups, [i for i, p in enumerate(self._checked) if id(p) in ids])
        return cached[1]

    def _on_optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self._opt_steps += 1
        index = self._opt_index.get(id(optimizer))
        if index is None or self._optimizers.get(id(optimizer)) is not optimizer:
            self._optimizers[id(optimizer)] = optimizer
            index = self._opt_index[id(optimizer)] = len(self._opt_counts)
            self._opt_counts.append(0)
            self._stale_by_opt.append([0, 0])
            self._dirty = True
        self._opt_counts[index] += 1
        for p in self._held_checked(optimizer):
            key = (p, index)
            if key in self._windows:
                reset = self._windows.pop(key)
                if reset is not None:  # a window with no backward into the parameter judges nothing
                    self._stale[0] += 1
                    self._stale_by_opt[index][0] += 1
                    if not reset:
                        self._stale[1] += 1
                        self._stale_by_opt[index][1] += 1
            if self._armed:
                self._windows[key] = None

    def _on_forward(self, module: torch.nn.Module, args: Any, kwargs: Any) -> None:
        """The batch of a forward whose step start took none: a micro-batch of a training step a
        trainer's loop started (hook/frameworks), or a model called with keywords only (the Hugging
        Face Trainer calls `model(**batch)`)."""
        if self._batch_taken:
            self._batch_taken = False
            return
        if self._step < 0 or self._mode == ModeKeys.EVAL or not torch.is_grad_enabled():
            return
        fp = fingerprint(args if args else kwargs)
        if fp is not None:
            self._batches.append((self._step, fp, list(self._opt_counts)))

    def _on_parameter_registered(self, module: torch.nn.Module, name: str, param: Any) -> Any:
        if param is not None and self._model is not None and self._step >= 0:
            evaluating = not torch.is_grad_enabled() or not self._model.training
            self._pending_new.append((id(param), evaluating))
            self._dirty = True
        return None

    # ------------------------------------------------------------------ steps
    def on_step_start(self, step: int, mode: ModeKeys, mode_step: int, module: torch.nn.Module, inputs: Any) -> None:
        """At each forward of the model (the hook's step start), and at a step a trainer's loop
        starts (`inputs` None: its batches come to `_on_forward`)."""
        self._step = step
        self._mode = mode
        self._batch_taken = False
        grad_enabled = torch.is_grad_enabled()
        if not grad_enabled or mode == ModeKeys.EVAL:
            self._eval_forwards += 1
            if module.training and self._has_mode_layers:
                # an evaluation pass: a second such forward with no optimizer step since the first
                # (a GAN's one no-grad generator forward per training step is not one)
                if mode == ModeKeys.EVAL or self._opt_steps == self._opt_at_last_eval_train:
                    self._eval_train_forwards += 1
                self._opt_at_last_eval_train = self._opt_steps
        elif mode != ModeKeys.EVAL:
            fp = fingerprint(inputs[0] if isinstance(inputs, tuple) and inputs else inputs)
            if fp is not None:  # with each optimizer's steps so far: a batch used twice within one iteration
                self._batches.append((step, fp, list(self._opt_counts)))
                self._batch_taken = True
        self._armed = False
        if mode == ModeKeys.GLOBAL or self.schedule.should_save(mode, mode_step):
            self._record(step, mode, mode_step, module.training, grad_enabled)
            self._armed = mode == ModeKeys.TRAIN or (mode == ModeKeys.GLOBAL and grad_enabled)
        if self._lines and time.monotonic() - self._last_flush >= FLUSH_S:
            self.flush()

    def _layout(self) -> None:
        assert self._model is not None
        self._params = list(self._model.named_parameters())
        self._buffers = [(n, b) for n, b in self._model.named_buffers() if b.is_floating_point()]
        by_id = {id(p): n for n, p in self._params}
        for pid, evaluating in self._pending_new:
            if evaluating and pid in by_id:
                self._new_in_eval.append(by_id[pid])
        self._pending_new = []
        self._dirty = False

    def _frozen_buffers(self) -> list[str]:
        """Floating buffers of modules whose own parameters are all frozen (a frozen BatchNorm's
        running statistics)."""
        assert self._model is not None
        out = []
        for path, sub in self._model.named_modules():
            own = list(sub.parameters(recurse=False))
            if own and not any(p.requires_grad for p in own):
                out += [f"{path}.{n}" if path else n for n, b in sub.named_buffers(recurse=False)
                        if b is not None and b.is_floating_point()]
        return out

    def _record(self, step: int, mode: ModeKeys, mode_step: int, training: bool, grad_enabled: bool) -> None:
        if self._worker is None:  # while torch.distributed is up (a final flush may come after it is torn down)
            self._worker = f"worker_{self._resolve_rank()}"
        if self._dirty:
            self._layout()
        flags = tuple(p.requires_grad for _, p in self._params)
        optimizers = list(self._optimizers.values())
        by_index = {self._opt_index[id(o)]: o for o in optimizers if id(o) in self._opt_index}
        held_by = [{id(p) for g in by_index[i].param_groups for p in g["params"]} if i in by_index else set()
                   for i in range(len(self._opt_counts))]
        held_ids = set().union(*held_by)
        key = (tuple(n for n, _ in self._params), flags, tuple(frozenset(h) for h in held_by), len(self._new_in_eval))
        if key != self._layout_key:
            self._layout_key = key
            self._lines.append({
                "kind": "layout", "step": step,
                "params": [n for n, _ in self._params],
                "ndims": [_ndim(p) for _, p in self._params],
                "frozen": [n for n, p in self._params if not p.requires_grad],
                "held": [n for n, p in self._params if id(p) in held_ids],
                "optimizers": len(optimizers),
                # per optimizer (in the order of their first step): the indices in `params` it holds
                "held_by": [[i for i, (_, p) in enumerate(self._params) if id(p) in h] for h in held_by],
                "buffers": [n for n, _ in self._buffers],
                "frozen_buffers": self._frozen_buffers(),
                "new_in_eval": list(self._new_in_eval),
            })
        if not self._lines:
            self._first_step = step
        self._lines.append({
            "kind": "step", "step": step, "mode": mode.name, "mode_step": mode_step,
            "training": training, "grad_enabled": grad_enabled,
            "optimizer_steps": self._opt_steps,
            "param_norms": _norms([p for _, p in self._params]),
            "buffer_norms": _norms([b for _, b in self._buffers]),
            "stale_gradients": list(self._stale),
            "stale_by_optimizer": [list(c) for c in self._stale_by_opt],
            "eval_forwards": self._eval_forwards,
            "eval_train_forwards": self._eval_train_forwards,
            "batches": self._batches,
        })
        self._batches = []

    def _resolve_rank(self) -> int:
        """The hook's rank; without torch.distributed up, the launcher's RANK (torchrun, mpirun's
        OMPI_COMM_WORLD_RANK) so that two processes never share a worker name."""
        rank = self._rank()
        if rank == 0 and not (torch.distributed.is_available() and torch.distributed.is_initialized()):
            for var in ("RANK", "OMPI_COMM_WORLD_RANK"):
                if os.environ.get(var, "").isdigit():
                    return int(os.environ[var])
        return rank

    # ------------------------------------------------------------------ files
    def flush(self) -> None:
        self._last_flush = time.monotonic()
        if not self._lines:
            return
        if self._worker is None:
            self._worker = f"worker_{self._resolve_rank()}"
        lines, self._lines = self._lines, []
        try:
            write_chunk(self.out_dir, self._worker, self._first_step, lines)
        except OSError as e:  # records are advisory: the training goes on
            logger.warning("sdlocal hook: cannot write training records in %s: %s", self.out_dir, e)

    def close(self) -> None:
        """The last counters and batches (a `final` line), the file, and the hooks removed."""
        if self._closed:
            return
        self._closed = True
        for h in self._handles:
            h.remove()
        self._handles = []
        if self._step >= 0:
            if not self._lines:
                self._first_step = self._step
            self._lines.append({"kind": "final", "step": self._step, "optimizer_steps": self._opt_steps,
                                "stale_gradients": list(self._stale),
                                "stale_by_optimizer": [list(c) for c in self._stale_by_opt],
                                "eval_forwards": self._eval_forwards,
                                "eval_train_forwards": self._eval_train_forwards, "batches": self._batches})
            self._batches = []
        self.flush()


def for_config(config: Any, out_dir: Path, rank: Callable[[], int]) -> Recorder | None:
    """A Recorder when the hook configuration has the records collection, else None."""
    for coll in config.collections_to_save():
        if coll.name == RECORDS_COLLECTION:
            return Recorder(out_dir, coll.save_config, rank)
    return None
