"""PoorWeightInitialization: symptoms of a bad initialization in the first steps of training."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from sdlocal.evaluator.params import parse_float, parse_int
from sdlocal.evaluator.rule import DefaultCollection, Rule, Verdict
from sdlocal.evaluator.rules._select import (
    TensorSelection,
    has_train_steps,
    reduction_or_none,
    training_position,
    value_or_none,
)


class PoorWeightInitialization(Rule):
    """Fires, during the first `steps` steps only, on any of three symptoms of a poor initialization:

    1. activation inputs: max/min of their variances across layers > `threshold` (a layer with
       zero variance beside one with a positive variance counts as an infinite ratio). The inputs
       are the `relu_input` collection (`collection_names`) ∪ the tensors matching
       `activation_inputs_regex`; a layer is one tensor; its variance is over all its elements
       (NaN and ±inf left out), from the hook's saved `variance` reduction when the raw value was not
       saved. Needs two layers with a variance at the step.
    2. gradients: p95 − p5 of the pooled elements of every `gradients` tensor saved at the step
       (finite values only; raw values needed) < `distribution_range`. Deviation from smdebug: of
       a gradient of 2 or more dimensions only the rows that received gradient (a non-zero
       element) are pooled (all of them when none did): an embedding's gradient is zero in every row its batch did not use,
       and a language model's vocabulary-sized table of zeros made p95 − p5 ~0 on healthy runs.
    3. loss not decreasing within patience: the first loss of the window (the mean of the
       `losses` tensors at the first step that has one) is the baseline; at the first step at least
       `patience` steps after it, the rule fires unless a loss in between (that step included) was
       strictly lower than the baseline. Judged once. A NaN loss is never lower. (A single-point
       rule such as "a new minimum every `patience` steps" cries wolf on noisy per-batch losses;
       this one only asks that training made *some* progress on the starting loss.)

    Steps are TRAIN steps when the trial has any (EVAL steps are not evaluated), else global
    steps; "the first `steps` steps" are those numbered below `steps`; later steps are not
    evaluated. A step where no symptom could be judged is not evaluated. With `patience` >=
    `steps` the loss is never judged.
    """

    group = "deep learning"
    default_collections = (
        DefaultCollection.of("relu_input", {"include_regex": ".*relu_input", "save_interval": "500"}),
        DefaultCollection.of("gradients"),  # sdlocal: the gradient spread check reads them
    )

    def __init__(
        self,
        base_trial: Any,
        activation_inputs_regex: object = ".*relu_input",
        threshold: object = 10.0,
        distribution_range: object = 0.001,
        patience: object = 5,
        steps: object = 10,
        collection_names: object = "relu_input",
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, action_str=action_str)
        rule = self.rule_name
        self.activations = TensorSelection(rule, collection_names, activation_inputs_regex, select_all_if_empty=False,
                                           regex_param="activation_inputs_regex")
        self.threshold = float(parse_float(rule, "threshold", threshold, minimum=1.0))  # type: ignore[arg-type]
        self.distribution_range = float(parse_float(rule, "distribution_range", distribution_range, minimum=0.0))  # type: ignore[arg-type]
        self.patience = int(parse_int(rule, "patience", patience, minimum=1))  # type: ignore[arg-type]
        self.steps = int(parse_int(rule, "steps", steps, minimum=1))  # type: ignore[arg-type]
        self.gradients = TensorSelection(rule, "gradients", None, select_all_if_empty=False)
        self.losses = TensorSelection(rule, "losses", None, select_all_if_empty=False)
        self._baseline: tuple[int, float] | None = None  # (position, loss)
        self._lower_seen = False
        self._loss_judged = False

    def _variance_ratio(self, step: int) -> float | None:
        variances = []
        for name in self.activations.names(self.base_trial, step):
            tensor = self.base_trial.tensor(name)
            raw = value_or_none(tensor, step)
            if raw is not None:
                finite = raw[np.isfinite(raw)] if np.issubdtype(raw.dtype, np.floating) else raw
                var = float(np.var(finite.astype(np.float64))) if finite.size else math.nan
            else:
                saved = reduction_or_none(tensor, step, "variance")  # 0.0 is a variance, not "none"
                var = math.nan if saved is None else saved
            if math.isfinite(var):
                variances.append(var)
        if len(variances) < 2 or max(variances) == 0.0:
            return None
        low, high = min(variances), max(variances)
        return math.inf if low == 0.0 else high / low

    def _gradient_spread(self, step: int) -> float | None:
        parts = []
        for name in self.gradients.names(self.base_trial, step):
            raw = value_or_none(self.base_trial.tensor(name), step)
            if raw is not None and raw.size:
                if raw.ndim >= 2:  # the rows that received gradient (an embedding's: its batch's tokens)
                    rows = raw.reshape(raw.shape[0], -1)
                    received = np.any(rows != 0, axis=1)
                    raw = rows[received] if received.any() else rows  # none at all: its zeros count
                flat = raw.astype(np.float64).ravel()
                parts.append(flat[np.isfinite(flat)])
        pooled = np.concatenate(parts) if parts else np.empty(0)
        if pooled.size == 0:
            return None
        p5, p95 = np.percentile(pooled, [5, 95])
        return float(p95 - p5)

    def _loss(self, step: int) -> float:
        values = [value_or_none(self.base_trial.tensor(n), step) for n in self.losses.names(self.base_trial, step)]
        with np.errstate(invalid="ignore", over="ignore"):  # inf - inf in a diverged loss: NaN, never "lower"
            means = [float(np.mean(v)) for v in values if v is not None and v.size]
            return float(np.mean(means)) if means else math.nan

    def _loss_stalled(self, step: int, position: int) -> bool | None:
        """None while the loss cannot be judged (yet, or any more)."""
        if self._loss_judged:
            return None
        loss = self._loss(step)
        if self._baseline is None:
            if not math.isnan(loss):
                self._baseline = (position, loss)
            return None
        if not math.isnan(loss) and loss < self._baseline[1]:
            self._lower_seen = True
        if position - self._baseline[0] < self.patience:
            return None
        self._loss_judged = True
        return not self._lower_seen

    def invoke_at_step(self, step: int) -> Verdict:
        position = training_position(self.base_trial, step, has_train_steps(self.base_trial))
        if position is None or position >= self.steps:
            return Verdict.NOT_EVALUATED
        findings = []
        ratio = self._variance_ratio(step)
        if ratio is not None:
            findings.append(ratio > self.threshold)
            if findings[-1]:
                self.logger.debug("%s: activation input variances differ %gx at step %d", self.rule_name, ratio, step)
        spread = self._gradient_spread(step)
        if spread is not None:
            findings.append(spread < self.distribution_range)
            if findings[-1]:
                self.logger.debug("%s: gradient p95-p5 = %g at step %d", self.rule_name, spread, step)
        stalled = self._loss_stalled(step, position)
        if stalled is not None:
            findings.append(stalled)
            if stalled:
                self.logger.debug("%s: loss not below %s within %d steps", self.rule_name, self._baseline, self.patience)
        if not findings:
            return Verdict.NOT_EVALUATED
        return Verdict.CONDITION_MET if any(findings) else Verdict.CONDITION_NOT_MET
