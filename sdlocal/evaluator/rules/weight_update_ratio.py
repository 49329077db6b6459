"""WeightUpdateRatio: weight updates far too large or far too small for their weights."""
from __future__ import annotations

import bisect
import math
from typing import Any

import numpy as np

from sdlocal.evaluator.params import parse_float, parse_int
from sdlocal.evaluator.rule import DefaultCollection, Rule, Verdict
from sdlocal.evaluator.rules._select import TensorSelection, has_train_steps, training_position, value_or_none


class WeightUpdateRatio(Rule):
    """Fires when ‖W_s − W_prev‖ / (‖W_prev‖ + epsilon) > large_threshold or < small_threshold for a
    tensor of the `weights` collection (Frobenius norms over all elements).

    W_prev is the tensor's value at its latest saved step at least `num_steps` steps before s
    (`num_steps` unset: its previous saved step). Steps are TRAIN steps when the trial has any
    (EVAL steps are not evaluated: the weights do not change there), else global steps; distances
    are counted in that mode's steps. Choices: a tensor without an earlier saved value, whose shape
    changed, or whose ratio is NaN (NaN weights are ExplodingTensor's finding) is not judged; a
    step without any judged tensor is not evaluated. The raw weights are needed (a difference
    cannot be computed from reductions).
    """

    group = "deep learning"
    default_collections = (DefaultCollection.of("weights", {"save_interval": "500"}),)

    def __init__(
        self,
        base_trial: Any,
        num_steps: object = None,
        large_threshold: object = 10.0,
        small_threshold: object = 1e-8,
        epsilon: object = 1e-9,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, action_str=action_str)
        rule = self.rule_name
        self.num_steps = parse_int(rule, "num_steps", num_steps, minimum=1, allow_none=True)
        self.large_threshold = float(parse_float(rule, "large_threshold", large_threshold, minimum=0.0))  # type: ignore[arg-type]
        self.small_threshold = float(parse_float(rule, "small_threshold", small_threshold, minimum=0.0))  # type: ignore[arg-type]
        self.epsilon = float(parse_float(rule, "epsilon", epsilon, minimum=0.0))  # type: ignore[arg-type]
        self.selection = TensorSelection(rule, "weights", None, select_all_if_empty=False)

    def _previous(self, tensor: Any, step: int, position: int, train_only: bool) -> int | None:
        """The latest saved global step before `step` at least `num_steps` counted steps back.
        Positions grow with the global step, so the scan goes backwards and stops at the first
        match (one pass over the whole history per step and tensor was quadratic in the run)."""
        gap = self.num_steps or 1
        steps = tensor.steps()
        for g in reversed(steps[: bisect.bisect_left(steps, step)]):
            pos = training_position(self.base_trial, g, train_only)
            if pos is not None and pos <= position - gap:
                return int(g)
        return None

    def invoke_at_step(self, step: int) -> Verdict:
        train_only = has_train_steps(self.base_trial)
        position = training_position(self.base_trial, step, train_only)
        if position is None:
            return Verdict.NOT_EVALUATED
        verdict = Verdict.NOT_EVALUATED
        fired = False
        for name in self.selection.names(self.base_trial, step):
            tensor = self.base_trial.tensor(name)
            current = value_or_none(tensor, step)
            prev_step = None if current is None else self._previous(tensor, step, position, train_only)
            previous = None if prev_step is None else value_or_none(tensor, prev_step)
            if current is None or previous is None or previous.shape != current.shape:
                continue
            cur = current.astype(np.float64)
            old = previous.astype(np.float64)
            ratio = float(np.linalg.norm(cur - old)) / (float(np.linalg.norm(old)) + self.epsilon)
            if math.isnan(ratio):
                continue
            verdict = Verdict.CONDITION_NOT_MET
            if ratio > self.large_threshold or ratio < self.small_threshold:
                self.logger.debug("%s: update ratio of %s = %g at step %d (vs step %d)", self.rule_name, name, ratio, step, prev_step)
                fired = True
        return Verdict.CONDITION_MET if fired else verdict
