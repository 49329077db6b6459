"""VanishingGradient: gradients too small to train."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from sdlocal.evaluator.params import parse_float
from sdlocal.evaluator.rule import DefaultCollection, Rule, Verdict
from sdlocal.evaluator.rules._select import TensorSelection, ndim_or_none, reduction_or_none, value_or_none


def mean_abs_received(gradient: np.ndarray) -> float | None:
    """mean(|g|) over the rows (first axis) that received gradient, i.e. have a non-zero element;
    0.0 when no row did; None for a gradient of fewer than 2 dimensions or an empty one.

    An embedding's gradient is sparse by nature: only the rows of the tokens in the batch get one
    (a 30,000-token vocabulary, a batch of a few hundred tokens: >99 % exact-zero rows), and its
    mean over all rows is tiny however well the model trains."""
    if gradient.ndim < 2 or gradient.size == 0:
        return None
    rows = np.abs(gradient.reshape(gradient.shape[0], -1).astype(np.float64, copy=False))
    received = rows.any(axis=1)
    if not received.any():
        return 0.0
    return float(rows[received].mean())


class VanishingGradient(Rule):
    """Fires when mean(|gradient|) < threshold for any gradient tensor saved at the step.

    Inspects the `gradients` collection. Deviations from smdebug (each a false alarm on healthy
    runs that says nothing about vanishing gradients):
    - the mean is over the rows that received gradient (`mean_abs_received`): an embedding (any
      lookup table) gets gradient in the rows its batch used only; exact-zero rows are rows not
      used, not gradients that vanished. A gradient with no non-zero row at all has mean 0: fires.
    - gradients of vectors (ndim <= 1: biases, norm scales and shifts) are not judged: a bias
      followed by a BatchNorm gets an (almost exactly) zero gradient by construction, the norm
      subtracts it again (conv-bias-BatchNorm, the default `nn.Conv2d(bias=True)`). Vanishing
      gradients through depth show in the weight matrices' gradients, which are judged.
    Uses the hook's saved `abs_mean` reduction when the raw gradient was not saved (then all rows
    count). Choices: a step without gradients (an EVAL step) is not evaluated; a NaN mean is
    ignored (that is ExplodingTensor's finding, not a vanishing gradient).
    """

    group = "deep learning"
    default_collections = (DefaultCollection.of("gradients", {"save_interval": "500"}),)

    def __init__(self, base_trial: Any, threshold: object = 1e-7, action_str: str = "") -> None:
        super().__init__(base_trial, action_str=action_str)
        self.threshold = float(parse_float(self.rule_name, "threshold", threshold, minimum=0.0))  # type: ignore[arg-type]
        self.selection = TensorSelection(self.rule_name, "gradients")

    def _mean_abs(self, tensor: Any, step: int) -> float | None:
        raw = value_or_none(tensor, step)
        if raw is not None:
            return mean_abs_received(raw)
        ndim = ndim_or_none(tensor, step)
        if ndim is not None and ndim <= 1:
            return None
        return reduction_or_none(tensor, step, "mean", abs=True)

    def invoke_at_step(self, step: int) -> Verdict:
        verdict = Verdict.NOT_EVALUATED
        for name in self.selection.names(self.base_trial, step):
            mean_abs = self._mean_abs(self.base_trial.tensor(name), step)
            if mean_abs is None or math.isnan(mean_abs):
                continue
            if mean_abs < self.threshold:
                self.logger.debug("%s: mean |%s| = %g < %g at step %d", self.rule_name, name, mean_abs, self.threshold, step)
                return Verdict.CONDITION_MET
            verdict = Verdict.CONDITION_NOT_MET
        return verdict
