"""TensorVariance: tensors whose variance is too large or too small."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from sdlocal.evaluator.errors import RuleParameterError
from sdlocal.evaluator.params import parse_float
from sdlocal.evaluator.rule import Rule, Verdict
from sdlocal.evaluator.rules._select import TensorSelection, ndim_or_none, reduction_or_none, value_or_none


class TensorVariance(Rule):
    """Fires when the variance of an inspected tensor is > `max_threshold` or < `min_threshold`.

    Both thresholds default to None (no bound), as in SageMaker. Choices:
    - With neither threshold the rule has nothing to check: every step is "not evaluated" and
      the rule ends NoIssuesFound (SageMaker's `rule_configs.tensor_variance()` passes no
      parameters). Once a threshold is set, `collection_names` or `tensor_regex` is required.
    - The variance is over all elements of the tensor at the step (`numpy.var`, population
      variance); a tensor saved only as reductions uses its saved `variance` reduction.
    - Empty tensors and a NaN variance (NaN/inf values: ExplodingTensor's job) are skipped.
    - Every mode's steps are inspected; a step without a selected tensor is not evaluated.
    - `min_threshold` judges tensors of two or more dimensions only (deviation from smdebug): a
      vector — a bias, a BatchNorm/LayerNorm scale or shift — is one number per unit, not a spread
      of weights feeding a unit, and it starts constant by design (norm scales at 1.0, biases at
      0.0: zero variance at step 0 in every healthy run). A weight matrix or kernel left constant
      (symmetry never broken) is still found. `max_threshold` judges every tensor.
    """

    group = "deep learning"

    def __init__(
        self,
        base_trial: Any,
        collection_names: object = None,
        tensor_regex: object = None,
        max_threshold: object = None,
        min_threshold: object = None,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, action_str=action_str)
        rule = self.rule_name
        self.max_threshold = parse_float(rule, "max_threshold", max_threshold, allow_none=True)
        self.min_threshold = parse_float(rule, "min_threshold", min_threshold, allow_none=True)
        if self.max_threshold is not None and self.min_threshold is not None and self.min_threshold > self.max_threshold:
            raise RuleParameterError(rule, "min_threshold", min_threshold, f"must be <= max_threshold ({self.max_threshold:g})")
        self.selection = TensorSelection(rule, collection_names, tensor_regex, select_all_if_empty=False)
        if self.configured and self.selection.empty:
            raise RuleParameterError(rule, "collection_names", collection_names, "collection_names or tensor_regex is required")

    @property
    def configured(self) -> bool:
        return self.max_threshold is not None or self.min_threshold is not None

    def _variance(self, tensor: Any, step: int) -> tuple[float | None, bool]:
        """The variance and whether the tensor is a vector (ndim <= 1; unknown shape: not)."""
        values = value_or_none(tensor, step)
        if values is None:
            ndim = ndim_or_none(tensor, step)  # None: a shape the trial cannot tell, judged as a matrix
            return reduction_or_none(tensor, step, "variance"), ndim is not None and ndim <= 1
        if values.size == 0:
            return None, False
        with np.errstate(all="ignore"):
            return float(np.var(values.astype(np.float64, copy=False))), values.ndim <= 1

    def invoke_at_step(self, step: int) -> Verdict:
        if not self.configured:
            return Verdict.NOT_EVALUATED
        verdict = Verdict.NOT_EVALUATED
        for name in self.selection.names(self.base_trial, step):
            variance, vector = self._variance(self.base_trial.tensor(name), step)
            if variance is None or math.isnan(variance):
                continue
            if (self.max_threshold is not None and variance > self.max_threshold) or (
                self.min_threshold is not None and variance < self.min_threshold and not vector
            ):
                self.logger.debug("%s: variance of %s is %g at step %d", self.rule_name, name, variance, step)
                return Verdict.CONDITION_MET
            verdict = Verdict.CONDITION_NOT_MET
        return verdict
