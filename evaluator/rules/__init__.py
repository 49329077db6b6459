"""The built-in rules, one module per rule (names as SageMaker's `rule_to_invoke`)."""
from __future__ import annotations

from evaluator.rules.all_zero import AllZero
from evaluator.rules.exploding_tensor import ExplodingTensor
from evaluator.rules.loss_not_decreasing import LossNotDecreasing
from evaluator.rules.unchanged_tensor import UnchangedTensor
from evaluator.rules.vanishing_gradient import VanishingGradient

__all__ = ["AllZero", "ExplodingTensor", "LossNotDecreasing", "UnchangedTensor", "VanishingGradient"]
