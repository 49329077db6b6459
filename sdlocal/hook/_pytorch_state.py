"""The PyTorch hook's state and the collections a tensor belongs to.

hook/pytorch.py's `Hook` is this base and two mixins: hook/_pytorch_attach.py (the torch callbacks
that take snapshots) and hook/_pytorch_writing.py (a step's snapshots to the writer, closing, the
zero-code hook's hand-over). The attributes are set by `Hook.__init__`; they are declared here so
each part reads them typed. Membership: a collection is a bit; a tensor name's mask (its
collections) and a mask's plan (the reductions it asks for) are decided once and cached.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from sdlocal.hook._saving import Saver
from sdlocal.hook._serialize import SavePlan
from sdlocal.hook._tensorboard import TensorBoardWriter
from sdlocal.hook._timeline import Timeline
from sdlocal.hook.config import (
    SCALAR_COLLECTIONS,
    TRAIN_ONLY_COLLECTIONS,
    CollectionConfig,
    HookConfig,
    ModeSaveConfig,
    Reduction,
)
from sdlocal.hook.records import Recorder
from sdlocal.hook.step_record import StepRecord
from sdlocal.trial.modes import ModeKeys
from sdlocal.trial.writer import TrialWriter

TrialWriterFactory = Callable[[Path, str], TrialWriter]

GRADIENT_PREFIX = "gradient/"
SCALAR_PREFIX = "scalar/"


def rank_and_world() -> tuple[int, int]:
    """(rank, world size) from torch.distributed when initialized, else (0, 1)."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


class HookState:
    # `<Loss>_labels` / `_predictions` also for a collection whose regex names them (smdebug's
    # API hook: only for the labels / predictions collections, smdebug has no such tensors)
    ROLE_TENSORS_BY_NAME = True

    config: HookConfig
    out_dir: Path
    auto: bool
    step: int
    mode: ModeKeys
    mode_steps: dict[ModeKeys, int]
    last_saved_step: int | None
    external_steps: frozenset[ModeKeys]
    final_gradients_only: bool
    handed_over: bool
    _tb_dir: Path | None
    _tb: TensorBoardWriter | None
    _saver: Saver
    _make_trial_writer: TrialWriterFactory
    _colls: list[CollectionConfig]
    _schedule: dict[ModeKeys, list[tuple[int, ModeSaveConfig]]]
    _tensor_names: dict[str, set[str]]
    _inherited: dict[str, CollectionConfig]
    _mask_cache: dict[str, int]
    _plan_cache: dict[int, SavePlan]
    _explicit_names: dict[str, int]
    _mode_step: int
    _started: bool
    _explicit_mode: ModeKeys | None
    _active: int
    _pending: dict[str, tuple[Any, int]]
    _io_counts: dict[str, int]
    _seen: dict[str, int]
    _collections_dirty: bool
    _step_handle: Any
    _attach_handles: list[Any]
    _params: list[tuple[str, torch.nn.Parameter, int]]
    _param_mask: int
    _model: torch.nn.Module | None
    _model_name: str
    _extra_models: list[tuple[torch.nn.Module, str]]
    _grad_params: list[tuple[str, torch.nn.Parameter, int]]
    _loss_modules: list[torch.nn.Module]
    _writer_started: bool
    _trial_writer: TrialWriter | None
    _write_enabled: bool
    _num_workers: int
    _closed: bool
    _steps: StepRecord
    _timeline: Timeline | None
    _timeline_handle: Any
    _records: Recorder | None

    @property
    def closed(self) -> bool:
        return self._closed

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
