"""One tensor of a trial (smdebug's Tensor API): values, shapes and reductions per step."""
from __future__ import annotations

import bisect
from typing import TYPE_CHECKING, Any

import numpy as np

from sdlocal.trial._index import Location, TensorRecord
from sdlocal.trial.errors import (
    InvalidWorker,
    ShapeUnavailableForStep,
    SMDebugNotImplementedError,
    StepNotYetAvailable,
    StepUnavailable,
    TensorUnavailableForStep,
)
from sdlocal.trial.modes import ModeKeys, to_mode
from sdlocal.trial.steps import StepState

if TYPE_CHECKING:
    from sdlocal.trial.trial import ModeArg, Trial

REDUCTIONS = ("min", "max", "mean", "std", "variance", "sum", "prod")
NORMS = ("l1", "l2")


def compute_reduction(value: np.ndarray, reduction: str, abs: bool = False) -> Any:
    """smdebug's reductions of a raw value; norms are vector norms of the flattened tensor."""
    data = np.absolute(value) if abs else np.asarray(value)
    if reduction == "min":
        return np.amin(data)
    if reduction == "max":
        return np.amax(data)
    if reduction == "mean":
        return np.mean(data)
    if reduction == "std":
        return np.std(data)
    if reduction == "variance":
        return np.var(data)
    if reduction == "sum":
        return np.sum(data)
    if reduction == "prod":
        return np.prod(data)
    if reduction == "l1":
        return np.sum(np.absolute(data))
    if reduction == "l2":
        flat = data.ravel()
        if flat.dtype.kind == "c":
            return np.sqrt(np.sum(flat * np.conj(flat)).real)
        return _unaligned_l2(flat) if flat.dtype.kind == "f" and not flat.flags.aligned else np.linalg.norm(flat)
    raise ValueError(f"unknown reduction {reduction!r}: expected one of {REDUCTIONS + NORMS}")


_L2_CHUNK = 1 << 16


def _unaligned_l2(flat: np.ndarray) -> Any:
    """np.linalg.norm of an unaligned 1-D array (a large value mapped from a record whose data is
    not aligned in its file, trial/_decode.py) by chunks copied into aligned memory: np.linalg.norm
    itself would copy the whole array into fresh memory at every call (50x slower on 64 MiB)."""
    total = 0.0
    for i in range(0, flat.size, _L2_CHUNK):
        chunk = np.array(flat[i:i + _L2_CHUNK])
        total += float(chunk.dot(chunk))
    return flat.dtype.type(np.sqrt(total))


def _mode_or_none(mode: ModeArg) -> ModeKeys | None:
    if mode is None:
        return None
    m = to_mode(mode)
    return None if m == ModeKeys.GLOBAL else m


class Tensor:
    """One tensor's steps and values. Steps are global unless a `mode` is given (then they are
    steps of that mode), as in smdebug; `step_num` keywords are smdebug's names."""

    def __init__(self, trial: Trial, record: TensorRecord) -> None:
        self.trial = trial
        self._rec = record

    @property
    def name(self) -> str:
        return self._rec.name

    def __repr__(self) -> str:
        return f"<Tensor {self.name!r}>"

    # ---- steps -----------------------------------------------------------------------------
    def steps(self, mode: ModeArg = ModeKeys.GLOBAL, show_incomplete_steps: bool = False) -> list[int]:
        """Global steps (mode GLOBAL/None) or mode steps at which this tensor was saved."""
        tr = self.trial
        tr.maybe_refresh(self.name)
        m = _mode_or_none(mode)
        complete = tr.loaded_all_steps or show_incomplete_steps
        lcs = tr.last_complete_step
        out = []
        for g in self._rec.steps:
            if not complete and g > lcs:
                continue
            if m is None:
                out.append(g)
            else:
                sm, ms = tr.mode_modestep(g)
                if sm == m and ms is not None:
                    out.append(ms)
        out.sort()
        return out

    def _known(self, step: int, m: ModeKeys | None) -> int | None:
        g = step if m is None else self.trial._known_global(m, step)
        return g if g is not None and g in self._rec.steps else None

    def _global(self, step: int, mode: ModeArg) -> int:
        """The global step of (step, mode), or the error smdebug raises for a step it cannot give:
        the step is complete but this tensor was not saved there (TensorUnavailableForStep), the
        step was skipped or is past the end of a finished training (StepUnavailable), or it may
        still come (StepNotYetAvailable)."""
        m = _mode_or_none(mode)
        g = self._known(step, m)
        if g is not None:
            return g
        tr = self.trial
        tr.maybe_refresh(self.name)
        g = self._known(step, m)
        if g is not None:
            return g
        shown = ModeKeys.GLOBAL if m is None else m
        state = tr._step_state(step, m)
        if state is StepState.AVAILABLE:
            raise TensorUnavailableForStep(self.name, step, shown)
        if state is StepState.UNAVAILABLE:
            raise StepUnavailable(step, shown)
        raise StepNotYetAvailable(step, shown)

    @staticmethod
    def _pick(by_worker: dict[str, Any] | None, worker: str | None) -> Any:
        if not by_worker:
            return None
        if worker is None:
            return by_worker[min(by_worker)]
        if worker not in by_worker:
            raise InvalidWorker(worker)
        return by_worker[worker]

    def _read(self, loc: Location, step: int, mode: ModeArg) -> np.ndarray:
        if not loc.key:  # the index file named no events file
            raise TensorUnavailableForStep(self.name, step, mode)
        try:
            return self.trial.read_record(loc)
        except FileNotFoundError:
            # the index names an events file that is not there (deleted, or not uploaded): lost data,
            # said by name (the trial keeps it in `missing_files` for its evaluator)
            raise self.trial.missing_events_file(loc.key, self.name, step, mode) from None

    # ---- values ----------------------------------------------------------------------------
    def value(self, step_num: int, mode: ModeArg = ModeKeys.GLOBAL, worker: str | None = None) -> np.ndarray:
        if mode is ModeKeys.GLOBAL and worker is None:
            # the common call (a global step, whichever worker): a step saved raw by one worker is
            # known without a refresh and read at once; the rest goes the general way below
            by_worker = self._rec.locations.get(step_num)
            if by_worker is not None and len(by_worker) == 1:
                for only in by_worker.values():
                    return self._read(only, step_num, mode)
        g = self._global(step_num, mode)
        loc: Location | None = self._pick(self._rec.locations.get(g), worker)
        if loc is None:
            has_reductions = any(g in by_step for by_step in self._rec.reductions.values())
            raise TensorUnavailableForStep(self.name, step_num, mode, has_reductions=has_reductions)
        return self._read(loc, step_num, mode)

    def values(self, mode: ModeArg = ModeKeys.GLOBAL, worker: str | None = None) -> dict[int, np.ndarray]:
        """Values at every step this tensor was saved raw at (steps with reductions only are left out)."""
        return {s: self.value(s, mode, worker) for s in self.steps(mode) if self._has_raw(s, mode)}

    def _has_raw(self, step: int, mode: ModeArg) -> bool:
        g = self._global(step, mode)
        return g in self._rec.locations

    def shape(self, step_num: int, mode: ModeArg = ModeKeys.GLOBAL, worker: str | None = None) -> tuple[int, ...]:
        g = self._global(step_num, mode)
        shape = self._pick(self._rec.shapes.get(g), worker)
        if shape is not None:
            return tuple(shape)
        try:
            return tuple(self.value(step_num, mode, worker).shape)
        except TensorUnavailableForStep:
            raise ShapeUnavailableForStep(self.name, step_num, mode) from None

    def shapes(self, mode: ModeArg = ModeKeys.GLOBAL, worker: str | None = None) -> dict[int, tuple[int, ...]]:
        """Shapes at every saved step (smdebug's documented `shapes`; steps without one are left out)."""
        out = {}
        for s in self.steps(mode):
            try:
                out[s] = self.shape(s, mode, worker)
            except ShapeUnavailableForStep:
                continue
        return out

    def workers(self, step_num: int, mode: ModeArg = ModeKeys.GLOBAL) -> list[str]:
        g = self._global(step_num, mode)
        ws: set[str] = set(self._rec.locations.get(g, {})) | set(self._rec.shapes.get(g, {}))
        for by_step in self._rec.reductions.values():
            ws |= set(by_step.get(g, {}))
        return sorted(ws)

    def reduction_value(
        self,
        step_num: int,
        reduction_name: str,
        mode: ModeArg = ModeKeys.GLOBAL,
        worker: str | None = None,
        abs: bool = False,
    ) -> Any:
        """A reduction saved by the hook (`smdebug/reductions/...`) or else computed from the raw value."""
        name = reduction_name[:-5] if reduction_name.endswith("_norm") else reduction_name
        g = self._global(step_num, mode)
        saved = self._rec.reductions.get((name, abs), {})
        loc: Location | None = self._pick(saved.get(g), worker)
        if loc is not None:
            return self._read(loc, step_num, mode)
        raw: Location | None = self._pick(self._rec.locations.get(g), worker)
        if raw is None:
            raise TensorUnavailableForStep(f"{self.name} ({'abs_' if abs else ''}{name})", step_num, mode)
        return compute_reduction(self._read(raw, step_num, mode), name, abs)

    def reduction_values(
        self, step_num: int, mode: ModeArg = ModeKeys.GLOBAL, worker: str | None = None
    ) -> dict[tuple[str, bool], Any]:
        """Every reduction saved for this step, keyed (reduction, abs)."""
        g = self._global(step_num, mode)
        out = {}
        for (red, is_abs), by_step in self._rec.reductions.items():
            loc = self._pick(by_step.get(g), worker)
            if loc is not None:
                out[(red, is_abs)] = self._read(loc, step_num, mode)
        return out

    def prev_steps(self, step: int, n: int | None = None, mode: ModeArg = ModeKeys.GLOBAL) -> list[int]:
        """The saved steps up to and including `step` (smdebug's), the last `n` of them if `n`."""
        steps = self.steps(mode)
        earlier = steps[: bisect.bisect_right(steps, step)]
        return earlier[-n:] if n else earlier

    def step(self, step_num: int, mode: ModeArg = ModeKeys.GLOBAL, worker: str | None = None) -> Any:
        raise SMDebugNotImplementedError(
            "step method has been removed. Please use tensor.value or tensor.reduction_value methods"
        )
