"""AllZero: tensors that are (mostly) exact zeros."""
from __future__ import annotations

from typing import Any

import numpy as np

from sdlocal.evaluator.errors import RuleParameterError
from sdlocal.evaluator.params import parse_float
from sdlocal.evaluator.rule import Rule, Verdict
from sdlocal.evaluator.rules._select import TensorSelection, reduction_or_none, value_or_none


class AllZero(Rule):
    """Fires when the percentage of exact zeros in an inspected tensor is ≥ `threshold` (%).

    `collection_names` or `tensor_regex` is required (a bad configuration otherwise). Empty
    tensors are skipped. A tensor saved only as reductions counts as 100 % zeros when its saved
    abs max is 0 (so it can only fire at threshold 100).
    """

    group = "universal"

    def __init__(
        self,
        base_trial: Any,
        collection_names: object = None,
        tensor_regex: object = None,
        threshold: object = 100.0,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, action_str=action_str)
        self.selection = TensorSelection(self.rule_name, collection_names, tensor_regex, select_all_if_empty=False)
        if self.selection.empty:
            raise RuleParameterError(
                self.rule_name, "collection_names", collection_names, "collection_names or tensor_regex is required"
            )
        self.threshold = float(parse_float(self.rule_name, "threshold", threshold, minimum=0.0, maximum=100.0))  # type: ignore[arg-type]

    def _zero_percent(self, tensor: Any, step: int) -> float | None:
        values = value_or_none(tensor, step)
        if values is None:
            abs_max = reduction_or_none(tensor, step, "max", abs=True)
            return None if abs_max is None else (100.0 if abs_max == 0.0 else 0.0)
        if values.size == 0:
            return None
        return 100.0 * float(np.count_nonzero(values == 0)) / values.size

    def invoke_at_step(self, step: int) -> Verdict:
        verdict = Verdict.NOT_EVALUATED
        for name in self.selection.names(self.base_trial, step):
            percent = self._zero_percent(self.base_trial.tensor(name), step)
            if percent is None:
                continue
            if percent >= self.threshold:
                self.logger.debug("%s: %s is %.1f%% zeros at step %d", self.rule_name, name, percent, step)
                return Verdict.CONDITION_MET
            verdict = Verdict.CONDITION_NOT_MET
        return verdict
