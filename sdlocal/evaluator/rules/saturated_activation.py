"""SaturatedActivation: tanh / sigmoid layers whose inputs sit in the flat tails."""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np

from sdlocal.evaluator.errors import RuleParameterError
from sdlocal.evaluator.params import parse_float
from sdlocal.evaluator.rule import DefaultCollection, Rule, Verdict
from sdlocal.evaluator.rules._select import TensorSelection
from sdlocal.evaluator.rules._units import percent_inactive_at

_TANH = re.compile("tanh", re.IGNORECASE)
_SIGMOID = re.compile("sigmoid", re.IGNORECASE)


def _inside(band: tuple[float, float]) -> Callable[[np.ndarray], np.ndarray]:
    """A node is active for a sample whose input lies inside the band (bounds included)."""
    low, high = band
    return lambda value: (value >= low) & (value <= high)


class SaturatedActivation(Rule):
    """Fires when more than `threshold_layer` % of the nodes of a tanh or sigmoid layer are saturated.

    A layer is one inspected tensor: the `tanh_input` / `sigmoid_input` collections
    (`collection_names`) ∪ the tensors matching `tensor_regex`. The first axis is the samples;
    every other position is a node (`_units.as_samples_by_units`). A node is active for a
    sample when its input lies inside the activation's band ([threshold_tanh_min,
    threshold_tanh_max] or [threshold_sigmoid_min, threshold_sigmoid_max], bounds included) and
    saturated when it is active in fewer than `threshold_inactivity` % of the step's samples.

    Tanh or sigmoid: membership of the `tanh_input` / `sigmoid_input` collection, else the name
    (containing "tanh" / "sigmoid", any case); a tensor that is neither is not judged. Choices as
    DeadRelu's: every step with such a tensor is evaluated in any mode, a step without one is not
    evaluated, NaN values are not samples, scalars are not judged.
    """

    group = "deep learning"
    default_collections = (DefaultCollection.of("tanh_input"), DefaultCollection.of("sigmoid_input"))  # sdlocal's

    def __init__(
        self,
        base_trial: Any,
        tensor_regex: object = ".*tanh_input,.*sigmoid_input",
        threshold_tanh_min: object = -9.4999,
        threshold_tanh_max: object = 9.4999,
        threshold_sigmoid_min: object = -23,
        threshold_sigmoid_max: object = 16.99999,
        threshold_inactivity: object = 1.0,
        threshold_layer: object = 50.0,
        collection_names: object = "tanh_input,sigmoid_input",
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, action_str=action_str)
        rule = self.rule_name
        self.selection = TensorSelection(rule, collection_names, tensor_regex, select_all_if_empty=False)
        self.tanh_band = self._band("threshold_tanh", threshold_tanh_min, threshold_tanh_max)
        self.sigmoid_band = self._band("threshold_sigmoid", threshold_sigmoid_min, threshold_sigmoid_max)
        self.threshold_inactivity = float(
            parse_float(rule, "threshold_inactivity", threshold_inactivity, minimum=0.0, maximum=100.0)  # type: ignore[arg-type]
        )
        self.threshold_layer = float(parse_float(rule, "threshold_layer", threshold_layer, minimum=0.0, maximum=100.0))  # type: ignore[arg-type]

    def _band(self, prefix: str, low: object, high: object) -> tuple[float, float]:
        lo = float(parse_float(self.rule_name, f"{prefix}_min", low))  # type: ignore[arg-type]
        hi = float(parse_float(self.rule_name, f"{prefix}_max", high))  # type: ignore[arg-type]
        if lo > hi:
            raise RuleParameterError(self.rule_name, f"{prefix}_min", low, f"must be <= {prefix}_max ({hi:g})")
        return lo, hi

    def _members(self, collection: str, step: int) -> set[str]:
        if collection not in self.base_trial.collections():
            return set()
        return set(self.base_trial.tensor_names(collection=collection, step=step))

    def _band_of(self, name: str, tanh: set[str], sigmoid: set[str]) -> tuple[float, float] | None:
        if name in tanh:
            return self.tanh_band
        if name in sigmoid:
            return self.sigmoid_band
        if _TANH.search(name):
            return self.tanh_band
        if _SIGMOID.search(name):
            return self.sigmoid_band
        return None

    def invoke_at_step(self, step: int) -> Verdict:
        verdict = Verdict.NOT_EVALUATED
        tanh = self._members("tanh_input", step)
        sigmoid = self._members("sigmoid_input", step)
        for name in self.selection.names(self.base_trial, step):
            band = self._band_of(name, tanh, sigmoid)
            if band is None:
                self.logger.debug("%s: %s is neither a tanh nor a sigmoid input; not judged", self.rule_name, name)
                continue
            saturated = percent_inactive_at(self.base_trial.tensor(name), step, _inside(band), self.threshold_inactivity)
            if saturated is None:
                continue
            if saturated > self.threshold_layer:
                self.logger.debug("%s: %.1f %% of the nodes of %s saturated at step %d", self.rule_name, saturated, name, step)
                return Verdict.CONDITION_MET
            verdict = Verdict.CONDITION_NOT_MET
        return verdict
