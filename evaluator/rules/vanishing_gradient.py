"""VanishingGradient: gradients too small to train."""
from __future__ import annotations

import math
from typing import Any

from sdlocal.evaluator.params import parse_float
from sdlocal.evaluator.rule import DefaultCollection, Rule, Verdict
from sdlocal.evaluator.rules._select import TensorSelection, reduction_or_none


class VanishingGradient(Rule):
    """Fires when mean(|gradient|) < threshold for any gradient tensor saved at the step.

    Inspects the `gradients` collection. Uses the hook's saved `abs_mean` reduction when the raw
    gradient was not saved. Choices: a step without gradients (an EVAL step) is not evaluated;
    a NaN mean is ignored (that is ExplodingTensor's finding, not a vanishing gradient).
    """

    group = "deep learning"
    default_collections = (DefaultCollection.of("gradients", {"save_interval": "500"}),)

    def __init__(self, base_trial: Any, threshold: object = 1e-7, action_str: str = "") -> None:
        super().__init__(base_trial, action_str=action_str)
        self.threshold = float(parse_float(self.rule_name, "threshold", threshold, minimum=0.0))  # type: ignore[arg-type]
        self.selection = TensorSelection(self.rule_name, "gradients")

    def invoke_at_step(self, step: int) -> Verdict:
        verdict = Verdict.NOT_EVALUATED
        for name in self.selection.names(self.base_trial, step):
            mean_abs = reduction_or_none(self.base_trial.tensor(name), step, "mean", abs=True)
            if mean_abs is None or math.isnan(mean_abs):
                continue
            if mean_abs < self.threshold:
                self.logger.debug("%s: mean |%s| = %g < %g at step %d", self.rule_name, name, mean_abs, self.threshold, step)
                return Verdict.CONDITION_MET
            verdict = Verdict.CONDITION_NOT_MET
        return verdict
