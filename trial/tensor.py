"""One tensor of a trial (smdebug's Tensor API): values, shapes and reductions per step."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from trial._index import Location, TensorRecord
from trial.errors import (
    NoMoreData,
    StepNotYetAvailable,
    StepUnavailable,
    TensorUnavailableForStep,
    TrialError,
)
from trial.modes import ModeKeys, to_mode

if TYPE_CHECKING:
    from trial.trial import ModeArg, Trial

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
        return np.sqrt(np.sum(flat * np.conj(flat)).real) if flat.dtype.kind == "c" else np.linalg.norm(flat)
    raise ValueError(f"unknown reduction {reduction!r}: expected one of {REDUCTIONS + NORMS}")


class Tensor:
    def __init__(self, trial: Trial, record: TensorRecord) -> None:
        self.trial = trial
        self._rec = record

    @property
    def name(self) -> str:
        return self._rec.name

    def __repr__(self) -> str:
        return f"<Tensor {self.name!r}>"

    # ---- steps -----------------------------------------------------------------------------
    def steps(self, mode: ModeArg = None, show_incomplete_steps: bool = False) -> list[int]:
        """Global steps (mode None/GLOBAL) or mode steps at which this tensor was saved."""
        tr = self.trial
        m = None if mode is None else to_mode(mode)
        complete = tr.loaded_all_steps or show_incomplete_steps
        lcs = tr.last_complete_step
        out = []
        for g in self._rec.steps:
            if not complete and (lcs is None or g > lcs):
                continue
            if m is None or m == ModeKeys.GLOBAL:
                out.append(g)
            else:
                sm, ms = tr.mode_modestep(g)
                if sm == m and ms is not None:
                    out.append(ms)
        out.sort()
        return out

    def _global(self, step: int, mode: ModeArg) -> int:
        """The global step of (step, mode), or the error smdebug raises for a step it cannot give."""
        m = None if mode is None else to_mode(mode)
        if m is None or m == ModeKeys.GLOBAL:
            if step in self._rec.steps:
                return step
        else:
            g = self.trial.global_step(m, step)
            if g is not None and g in self._rec.steps:
                return g
        # Not known yet: look once more, then explain.
        tr = self.trial
        tr.refresh()
        if m is None or m == ModeKeys.GLOBAL:
            g = step
            known = tr.steps(show_incomplete_steps=True)
        else:
            g = tr.global_step(m, step)  # type: ignore[assignment]
            known = tr.steps(m, show_incomplete_steps=True)
        if g is not None and g in self._rec.steps:
            return g
        if step in known:
            raise TensorUnavailableForStep(self.name, step, m)
        if known and step < known[-1]:
            raise StepUnavailable(step, m)
        if tr.loaded_all_steps:
            raise NoMoreData(
                f"Looking for step:{step} for mode {m} and reached end of training. "
                f"Max step available is {known[-1] if known else -1}"
            )
        raise StepNotYetAvailable(step, m)

    @staticmethod
    def _pick(by_worker: dict[str, Any] | None, worker: str | None) -> Any:
        if not by_worker:
            return None
        if worker is None:
            return by_worker[min(by_worker)]
        if worker not in by_worker:
            raise TrialError(f"worker {worker!r} did not save this step (workers: {sorted(by_worker)})")
        return by_worker[worker]

    # ---- values ----------------------------------------------------------------------------
    def value(self, step: int, mode: ModeArg = None, worker: str | None = None) -> np.ndarray:
        g = self._global(step, mode)
        loc: Location | None = self._pick(self._rec.locations.get(g), worker)
        if loc is None:
            raise TensorUnavailableForStep(self.name, step, mode, has_reductions=bool(self._rec.reductions))
        return self.trial.read_record(loc)

    def values(self, mode: ModeArg = None, worker: str | None = None) -> dict[int, np.ndarray]:
        return {s: self.value(s, mode, worker) for s in self.steps(mode) if self._has_raw(s, mode)}

    def _has_raw(self, step: int, mode: ModeArg) -> bool:
        g = self._global(step, mode)
        return g in self._rec.locations

    def shape(self, step: int, mode: ModeArg = None, worker: str | None = None) -> tuple[int, ...]:
        g = self._global(step, mode)
        shape = self._pick(self._rec.shapes.get(g), worker)
        if shape is not None:
            return tuple(shape)
        return tuple(self.value(step, mode, worker).shape)

    def workers(self, step: int, mode: ModeArg = None) -> list[str]:
        g = self._global(step, mode)
        ws: set[str] = set(self._rec.locations.get(g, {})) | set(self._rec.shapes.get(g, {}))
        for by_step in self._rec.reductions.values():
            ws |= set(by_step.get(g, {}))
        return sorted(ws)

    def reduction_value(
        self, step: int, reduction_name: str, mode: ModeArg = None, worker: str | None = None, abs: bool = False
    ) -> Any:
        """A reduction saved by the hook (`smdebug/reductions/...`) or else computed from the raw value."""
        name = reduction_name[:-5] if reduction_name.endswith("_norm") else reduction_name
        g = self._global(step, mode)
        saved = self._rec.reductions.get((name, abs), {})
        loc: Location | None = self._pick(saved.get(g), worker)
        if loc is not None:
            return self.trial.read_record(loc)
        raw: Location | None = self._pick(self._rec.locations.get(g), worker)
        if raw is None:
            raise TensorUnavailableForStep(f"{self.name} ({'abs_' if abs else ''}{name})", step, mode)
        return compute_reduction(self.trial.read_record(raw), name, abs)

    def reduction_values(self, step: int, mode: ModeArg = None, worker: str | None = None) -> dict[tuple[str, bool], Any]:
        """Every reduction saved for this step, keyed (reduction, abs)."""
        g = self._global(step, mode)
        out = {}
        for (red, is_abs), by_step in self._rec.reductions.items():
            loc = self._pick(by_step.get(g), worker)
            if loc is not None:
                out[(red, is_abs)] = self.trial.read_record(loc)
        return out

    def prev_steps(self, step: int, n: int | None = None, mode: ModeArg = None) -> list[int]:
        steps = [s for s in self.steps(mode) if s < step]
        return steps if n is None else steps[-n:]
