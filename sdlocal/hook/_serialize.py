"""What the background writer does with one step: reductions, numpy conversion, TrialWriter calls.
Runs off the training thread; the tensors it gets are snapshots (hook._copier): private copies,
whose `value()` waits for a device copy to be done. The snapshots are released by the writer once
the step's jobs have run (hook._async_writer), so a job must not keep a value after it returns."""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from sdlocal.hook._copier import Snapshot
from sdlocal.hook._tensorboard import TensorBoardWriter
from sdlocal.hook.config import Reduction
from sdlocal.trial.collection import Collection
from sdlocal.trial.modes import ModeKeys
from sdlocal.trial.writer import TrialWriter

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SavePlan:
    """How to save one tensor, from the collections it is saved for at this step."""

    reductions: tuple[Reduction, ...] = ()
    save_raw_tensor: bool = True
    save_shape: bool = False


RAW_ONLY = SavePlan()


@dataclass(frozen=True)
class StepJob:
    writer: TrialWriter
    step: int
    mode: ModeKeys
    mode_step: int
    items: tuple[tuple[str, Snapshot, SavePlan], ...]

    def __call__(self) -> None:
        tensors: list[tuple[str, np.ndarray]] = []
        shapes: list[tuple[str, tuple[int, ...]]] = []
        for name, snap, plan in self.items:
            if plan.save_shape:
                shapes.append((name, snap.shape))
            if not plan.reductions and not plan.save_raw_tensor:
                continue
            value = snap.value()
            for red in plan.reductions:
                reduced = reduce(value, red)
                if reduced is not None:
                    tensors.append((red.tensor_name(name), reduced))
            if plan.save_raw_tensor and _size(value) > 0:
                tensors.append((name, to_numpy(value)))
        self.writer.write_step(self.step, self.mode, self.mode_step, tensors, shapes=shapes)


@dataclass(frozen=True)
class CollectionsJob:
    writer: TrialWriter
    collections: tuple[Collection, ...]
    num_workers: int

    def __call__(self) -> None:
        self.writer.write_collections(self.collections, self.num_workers)


@dataclass(frozen=True)
class EndMarkerJob:
    writer: TrialWriter

    def __call__(self) -> None:
        self.writer.write_end_marker()


@dataclass(frozen=True)
class TensorBoardJob:
    """One step's TensorBoard events: single values as scalars, the rest as histograms. The
    step's mode (not GLOBAL) prefixes the tag, so TRAIN and EVAL curves stay apart."""

    writer: TensorBoardWriter
    step: int
    prefix: str
    scalars: tuple[tuple[str, Snapshot], ...]
    histograms: tuple[tuple[str, Snapshot], ...]

    def __call__(self) -> None:
        for name, snap in self.scalars:
            arr = to_numpy(snap.value()).astype(np.float64, copy=False)
            self.writer.add_scalar(self.prefix + name, float(arr.reshape(-1)[0]), self.step)
        for name, snap in self.histograms:
            self.writer.add_histogram(self.prefix + name, to_numpy(snap.value()), self.step)
        self.writer.flush()


@dataclass(frozen=True)
class Batch:
    """Jobs that read the same snapshots, run in order (the snapshots are released after the last)."""

    jobs: tuple[Callable[[], None], ...]

    def __call__(self) -> None:
        for job in self.jobs:
            job()


@dataclass(frozen=True)
class CloseJob:
    closeable: Any

    def __call__(self) -> None:
        self.closeable.close()


def _size(value: torch.Tensor | np.ndarray) -> int:
    return int(value.numel()) if isinstance(value, torch.Tensor) else int(np.asarray(value).size)


def to_numpy(value: torch.Tensor | np.ndarray) -> np.ndarray:
    if isinstance(value, np.ndarray):
        return value
    t = value.detach()
    if t.dtype == torch.bfloat16 or not _numpy_has(t.dtype):
        t = t.to(torch.float32)
    return t.cpu().numpy()


def _numpy_has(dtype: torch.dtype) -> bool:
    return dtype in (torch.float16, torch.float32, torch.float64, torch.int8, torch.int16, torch.int32,
                     torch.int64, torch.uint8, torch.bool, torch.complex64, torch.complex128)


def reduce(value: torch.Tensor | np.ndarray, red: Reduction) -> np.ndarray | None:
    """smdebug's PyTorch reductions (torch semantics: std/variance are unbiased), as float32/64."""
    t = value if isinstance(value, torch.Tensor) else torch.as_tensor(value)
    if t.numel() == 0:
        return None
    if not (t.is_floating_point() or t.is_complex()) or t.dtype in (torch.float16, torch.bfloat16):
        t = t.to(torch.float32)
    if red.abs:
        t = t.abs()
    try:
        if red.op in ("l1", "l2"):
            out = torch.linalg.vector_norm(t, ord=int(red.op[1]))
        elif red.op == "variance":
            out = t.var()
        else:
            out = getattr(t, red.op)()
    except RuntimeError as e:  # e.g. max of a complex tensor
        logger.warning("could not compute reduction %s: %s", red.config_token, e)
        return None
    return out.detach().cpu().numpy()
