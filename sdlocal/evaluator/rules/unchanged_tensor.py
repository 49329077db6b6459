"""UnchangedTensor: tensors that stopped changing."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sdlocal.evaluator.params import parse_bool, parse_float, parse_int
from sdlocal.evaluator.rule import Rule, Verdict
from sdlocal.evaluator.rules._select import TensorSelection, has_train_steps, value_or_none
from sdlocal.trial.modes import ModeKeys

# With neither collection_names nor tensor_regex: the state training changes (not its data).
TRAINED_STATE = "weights,biases,gradients,losses"
SAMPLE = 4096  # elements of a tensor compared at every step; the whole tensor only to confirm


@dataclass
class _Run:
    """A tensor's current run of steps whose sampled values stayed allclose, newest last."""

    steps: list[int] = field(default_factory=list)
    sample: np.ndarray | None = None  # the newest step's sampled elements
    seen: int = 0  # training steps at which the tensor was read


def sampled(value: np.ndarray) -> np.ndarray:
    """At most SAMPLE elements of the value, evenly spaced over it (a copy: values are views of
    storage reads). allclose on every element implies it on the sample, so a sample that changed
    proves the tensor changed; an unchanged sample is confirmed on the whole tensor."""
    flat = value.reshape(-1)
    if flat.size <= SAMPLE:
        return flat.copy()
    return flat[np.linspace(0, flat.size - 1, SAMPLE).astype(np.int64)]


class UnchangedTensor(Rule):
    """Fires when an inspected tensor stays `numpy.allclose` over its last `num_steps` saved values.

    `numpy.allclose(rtol, atol, equal_nan)` must hold between each pair of consecutive values
    among the last `num_steps` saved values of the tensor, ending at this step.

    Inspects `collection_names` ∪ `tensor_regex`; with neither, the state training changes: the
    `weights`, `biases`, `gradients` and `losses` collections (deviation from smdebug, which reads
    every tensor: a job's data — labels, a GAN's constant real/fake targets, a recurrent model's
    zero initial state, token ids — do not change by design; reading them was a false alarm and
    most of the rule's reading time). Named explicitly, any tensor is judged.

    Only training steps are compared (TRAIN steps when the trial has any, else GLOBAL ones):
    an evaluation pass runs no update, so its steps' weights are equal by nature (deviation from
    smdebug, which compares the steps of any one mode). A tensor with fewer than `num_steps` saved
    values so far, or whose shape changed, is not judged.

    Reading (so the rule keeps up with a job saving every step): each step reads each tensor once
    and compares SAMPLE evenly spaced elements with the previous step's; only a tensor whose sample
    stayed allclose over `num_steps` steps is read whole at those steps to confirm (the verdict is
    exactly smdebug's comparison; the cost is one read per tensor per step).
    """

    group = "universal"

    def __init__(
        self,
        base_trial: Any,
        collection_names: object = None,
        tensor_regex: object = None,
        num_steps: object = 3,
        rtol: object = 1e-5,
        atol: object = 1e-8,
        equal_nan: object = False,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, action_str=action_str)
        rule = self.rule_name
        self.selection = TensorSelection(rule, collection_names, tensor_regex)
        self.default_selection = self.selection.empty
        if self.default_selection:
            self.selection = TensorSelection(rule, TRAINED_STATE, None, select_all_if_empty=False)
        self.num_steps = int(parse_int(rule, "num_steps", num_steps, minimum=2))  # type: ignore[arg-type]
        self.rtol = float(parse_float(rule, "rtol", rtol, minimum=0.0))  # type: ignore[arg-type]
        self.atol = float(parse_float(rule, "atol", atol, minimum=0.0))  # type: ignore[arg-type]
        self.equal_nan = parse_bool(rule, "equal_nan", equal_nan)
        self._runs: dict[str, _Run] = {}

    def _close(self, a: np.ndarray, b: np.ndarray) -> bool:
        return a.shape == b.shape and bool(np.allclose(a, b, rtol=self.rtol, atol=self.atol, equal_nan=self.equal_nan))

    def _confirmed(self, tensor: Any, steps: list[int]) -> bool:
        """Whole-tensor allclose between each pair of consecutive steps."""
        values = [value_or_none(tensor, s) for s in steps]
        return all(prev is not None and cur is not None and self._close(prev, cur)
                   for prev, cur in zip(values, values[1:], strict=False))

    def _is_training_step(self, step: int) -> bool:
        mode, _ = self.base_trial.mode_modestep(step)
        if has_train_steps(self.base_trial):
            return bool(mode == ModeKeys.TRAIN)
        return mode is None or mode == ModeKeys.GLOBAL

    def invoke_at_step(self, step: int) -> Verdict:
        if not self._is_training_step(step):
            return Verdict.NOT_EVALUATED
        verdict = Verdict.NOT_EVALUATED
        fired = False
        for name in self.selection.names(self.base_trial, step):
            tensor = self.base_trial.tensor(name)
            value = value_or_none(tensor, step)
            if value is None or (self.default_selection and not np.issubdtype(value.dtype, np.inexact)):
                continue
            run = self._runs.setdefault(name, _Run())
            if run.steps and run.steps[-1] == step:
                continue
            sample = sampled(value)
            if run.sample is not None and self._close(run.sample, sample):
                run.steps = [*run.steps[1 - self.num_steps:], step]
            else:
                run.steps = [step]
            run.sample, run.seen = sample, run.seen + 1
            if run.seen < self.num_steps:
                continue
            verdict = Verdict.CONDITION_NOT_MET
            # keep updating every tensor's run even after one fired
            if not fired and len(run.steps) >= self.num_steps and self._confirmed(tensor, run.steps):
                self.logger.debug("%s: %s unchanged over steps %s", self.rule_name, name, run.steps)
                fired = True
        return Verdict.CONDITION_MET if fired else verdict
