"""Shared helpers of the built-in rules: which tensors a rule inspects at a step, reading a
tensor's value or reductions without treating missing data as an error, and which steps count
as training steps."""
from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from sdlocal.evaluator.errors import RuleParameterError
from sdlocal.evaluator.params import parse_str_list
from sdlocal.evaluator.rule import MISSING_DATA_ERRORS
from sdlocal.trial.errors import ShapeUnavailableForStep
from sdlocal.trial.modes import ModeKeys

REDUCTION_PREFIX = "smdebug/"


class TensorSelection:
    """The union of `collection_names` and `tensor_regex` (comma lists or lists), or every tensor
    when `select_all_if_empty` and neither is given. A collection the trial does not have selects
    nothing (the hook may not have saved it yet); a regex is searched (`re.search`), as smdebug.
    `regex_param` is the rule's name for the regex parameter (errors name it)."""

    def __init__(
        self,
        rule: str,
        collection_names: object = None,
        tensor_regex: object = None,
        *,
        select_all_if_empty: bool = True,
        regex_param: str = "tensor_regex",
    ) -> None:
        self.collections = parse_str_list(rule, "collection_names", collection_names)
        self.regex_texts = parse_str_list(rule, regex_param, tensor_regex)
        self.regexes: list[re.Pattern[str]] = []
        for text in self.regex_texts:
            try:
                self.regexes.append(re.compile(text))
            except re.error as exc:
                raise RuleParameterError(rule, regex_param, text, f"not a regular expression ({exc})") from None
        self.select_all_if_empty = select_all_if_empty

    @property
    def empty(self) -> bool:
        return not self.collections and not self.regexes

    def names(self, trial: Any, step: int | None = None) -> list[str]:
        """Sorted names of the selected tensors (saved at global `step` when given)."""
        kwargs: dict[str, Any] = {} if step is None else {"step": step}
        if self.empty:
            found = set(trial.tensor_names(**kwargs)) if self.select_all_if_empty else set()
        else:
            found = set()
            known = trial.collections()
            for name in self.collections:
                if name in known:
                    found.update(trial.tensor_names(collection=name, **kwargs))
            if self.regexes:
                for tname in trial.tensor_names(**kwargs):
                    if any(rx.search(tname) for rx in self.regexes):
                        found.add(tname)
        return sorted(n for n in found if not n.startswith(REDUCTION_PREFIX))


def value_or_none(tensor: Any, step: int) -> np.ndarray | None:
    """The raw value at global `step`, or None when it was not saved (or saved as reductions only)."""
    try:
        return np.asarray(tensor.value(step))
    except MISSING_DATA_ERRORS:
        return None


_SHAPE_ERRORS: tuple[type[Exception], ...] = (*MISSING_DATA_ERRORS, ShapeUnavailableForStep)


def ndim_or_none(tensor: Any, step: int) -> int | None:
    """The number of dimensions of the tensor at global `step`, or None when the trial cannot tell."""
    try:
        return len(tensor.shape(step))
    except _SHAPE_ERRORS:
        return None


def reduction_or_none(tensor: Any, step: int, name: str, *, abs: bool = False) -> float | None:
    """A saved (or computed) reduction at global `step`, or None when neither is available."""
    try:
        return float(tensor.reduction_value(step, name, abs=abs))
    except MISSING_DATA_ERRORS:
        return None
    except (KeyError, ValueError):
        return None


def mean_losses(trial: Any, selection: TensorSelection, step: int) -> dict[str, float]:
    """The mean value of each selected tensor saved at `step` (a loss: a scalar, or a per-sample
    vector); tensors not saved at the step, empty ones and NaN means are left out."""
    losses: dict[str, float] = {}
    for name in selection.names(trial, step):
        values = value_or_none(trial.tensor(name), step)
        if values is None or values.size == 0:
            continue
        loss = float(np.mean(values))
        if not np.isnan(loss):
            losses[name] = loss
    return losses


class RunningMeans:
    """Running means (and spreads) of losses per tensor name, in constant memory."""

    def __init__(self) -> None:
        self.sums: dict[str, float] = {}
        self.squares: dict[str, float] = {}
        self.counts: dict[str, int] = {}

    def add(self, losses: dict[str, float]) -> None:
        for name, loss in losses.items():
            self.sums[name] = self.sums.get(name, 0.0) + loss
            self.squares[name] = self.squares.get(name, 0.0) + loss * loss
            self.counts[name] = self.counts.get(name, 0) + 1

    def mean(self, name: str) -> float | None:
        count = self.counts.get(name)
        return None if not count else self.sums[name] / count

    def std(self, name: str) -> float | None:
        """The sample standard deviation (n − 1); None with fewer than 2 values (no spread)."""
        count = self.counts.get(name, 0)
        if count < 2:
            return None
        mean = self.sums[name] / count
        return math.sqrt(max(self.squares[name] - count * mean * mean, 0.0) / (count - 1))

    def means(self) -> dict[str, float]:
        return {name: self.sums[name] / self.counts[name] for name in self.sums}


def is_training(mode: ModeKeys | None) -> bool:
    """TRAIN steps are training, and so are GLOBAL ones (a hook that never set a mode)."""
    return mode is None or mode in (ModeKeys.TRAIN, ModeKeys.GLOBAL)


def has_train_steps(trial: Any) -> bool:
    return ModeKeys.TRAIN in trial.modes()


def training_position(trial: Any, step: int, train_only: bool) -> int | None:
    """The step's place among the counted steps: its TRAIN mode step when `train_only` (the trial
    has TRAIN steps, `has_train_steps`; a step of another mode then has no place: None), else
    the global step."""
    if not train_only:
        return step
    mode, mode_step = trial.mode_modestep(step)
    if mode != ModeKeys.TRAIN or mode_step is None:
        return None
    return int(mode_step)


def unsaved_collections(rule: Any, trial: Any) -> list[str]:
    """The collections the rule's selections name that the trial does not have (in the order named)."""
    known = trial.collections()
    missing: list[str] = []
    for value in vars(rule).values():
        if isinstance(value, TensorSelection):
            missing += [c for c in value.collections if c not in known and c not in missing]
    return missing
