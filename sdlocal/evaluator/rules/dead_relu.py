"""DeadRelu: ReLU layers whose units (almost) never activate."""
from __future__ import annotations

from typing import Any

import numpy as np

from sdlocal.evaluator.params import parse_float
from sdlocal.evaluator.rule import DefaultCollection, Rule, Verdict
from sdlocal.evaluator.rules._select import TensorSelection
from sdlocal.evaluator.rules._units import percent_inactive_at


def _positive(value: np.ndarray) -> np.ndarray:
    return value > 0


class DeadRelu(Rule):
    """Fires when more than `threshold_layer` % of a layer's units are dead.

    A layer is one inspected tensor: the `relu_output` collection (`collection_names`) ∪ the
    tensors matching `tensor_regex`, so both modules named like `layer0_relu` and nn.ReLU modules
    the hook put in the collection are seen. The first axis is the samples; every other position
    is a unit (`_units.as_samples_by_units`). A unit is dead when it is active (> 0) in fewer than
    `threshold_inactivity` % of the step's samples.

    Choices: every step where such a tensor was saved is evaluated, in any mode (activations of an
    EVAL batch are as telling as a TRAIN batch's); a step without one is not evaluated; NaN values
    are not samples (a unit with only NaN is left out; NaN is ExplodingTensor's finding); a scalar
    tensor has no samples and is not judged. The raw output is needed: reductions cannot tell
    units apart.
    """

    group = "deep learning"
    default_collections = (DefaultCollection.of("relu_output", {"include_regex": ".*relu_output", "save_interval": "500"}),)

    def __init__(
        self,
        base_trial: Any,
        tensor_regex: object = ".*relu_output",
        threshold_inactivity: object = 1.0,
        threshold_layer: object = 50.0,
        collection_names: object = "relu_output",
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, action_str=action_str)
        rule = self.rule_name
        self.selection = TensorSelection(rule, collection_names, tensor_regex, select_all_if_empty=False)
        self.threshold_inactivity = float(
            parse_float(rule, "threshold_inactivity", threshold_inactivity, minimum=0.0, maximum=100.0)  # type: ignore[arg-type]
        )
        self.threshold_layer = float(parse_float(rule, "threshold_layer", threshold_layer, minimum=0.0, maximum=100.0))  # type: ignore[arg-type]

    def invoke_at_step(self, step: int) -> Verdict:
        verdict = Verdict.NOT_EVALUATED
        for name in self.selection.names(self.base_trial, step):
            dead = percent_inactive_at(self.base_trial.tensor(name), step, _positive, self.threshold_inactivity)
            if dead is None:
                continue
            if dead > self.threshold_layer:
                self.logger.debug("%s: %.1f %% of the units of %s dead at step %d", self.rule_name, dead, name, step)
                return Verdict.CONDITION_MET
            verdict = Verdict.CONDITION_NOT_MET
        return verdict
