"""ExplodingTensor: NaN (or infinite) values."""
from __future__ import annotations

from typing import Any

import numpy as np

from sdlocal.evaluator.params import parse_bool
from sdlocal.evaluator.rule import MISSING_DATA_ERRORS, Rule, Verdict
from sdlocal.evaluator.rules._select import TensorSelection, value_or_none


def _bad(values: np.ndarray, only_nan: bool) -> bool:
    if not np.issubdtype(values.dtype, np.inexact):
        return False  # integers and booleans cannot be NaN or infinite
    return bool(np.isnan(values).any() or (not only_nan and np.isinf(values).any()))


class ExplodingTensor(Rule):
    """Fires when any inspected tensor at the step holds NaN, or ±inf unless `only_nan`.

    Inspects `collection_names` ∪ `tensor_regex`; with neither, every tensor of the trial
    (choice). A tensor saved only as reductions is judged on its saved reductions.
    """

    group = "deep learning"

    def __init__(
        self,
        base_trial: Any,
        collection_names: object = None,
        tensor_regex: object = None,
        only_nan: object = False,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, action_str=action_str)
        self.selection = TensorSelection(self.rule_name, collection_names, tensor_regex)
        self.only_nan = parse_bool(self.rule_name, "only_nan", only_nan)

    def invoke_at_step(self, step: int) -> Verdict:
        verdict = Verdict.NOT_EVALUATED
        for name in self.selection.names(self.base_trial, step):
            tensor = self.base_trial.tensor(name)
            values = value_or_none(tensor, step)
            if values is None:
                try:
                    reductions = tensor.reduction_values(step)
                except MISSING_DATA_ERRORS:
                    continue
                if not reductions:
                    continue
                values = np.asarray(list(reductions.values()), dtype=np.float64)
            if _bad(values, self.only_nan):
                self.logger.debug("%s: %s is not finite at step %d", self.rule_name, name, step)
                return Verdict.CONDITION_MET
            verdict = Verdict.CONDITION_NOT_MET
        return verdict
