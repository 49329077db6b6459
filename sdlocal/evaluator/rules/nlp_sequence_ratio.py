"""NLPSequenceRatio: input sequences made mostly of one token (padding, unknown words)."""
from __future__ import annotations

from typing import Any

import numpy as np

from sdlocal.evaluator.errors import RuleParameterError
from sdlocal.evaluator.params import parse_float, parse_str_list
from sdlocal.evaluator.rule import DefaultCollection, Rule, Verdict
from sdlocal.evaluator.rules._select import TensorSelection, value_or_none


class NLPSequenceRatio(Rule):
    """Fires when a token makes up more than its threshold % of the values of an input-sequence
    tensor at a step.

    Inputs: the `input_sequence` collection (`collection_names`) ∪ the tensors matching
    `tensor_regex`. `token_values` and `token_thresholds_percent` are comma lists of the same
    length, or one threshold for every token.

    Choices: each saved batch is judged on its own, in any mode (a step without such a tensor is
    not evaluated); the ratio is over every element of the tensor (all sequences, all positions),
    NaN elements left out; tokens compare by value (`7` matches 7.0 in a float tensor).
    """

    group = "DL applications"
    default_collections = (
        DefaultCollection.of("input_sequence", {"include_regex": ".*embedding0_input_0", "save_interval": "500"}),
    )

    def __init__(
        self,
        base_trial: Any,
        tensor_regex: object = ".*embedding0_input_0",
        token_values: object = "0",
        token_thresholds_percent: object = "50",
        collection_names: object = "input_sequence",
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, action_str=action_str)
        rule = self.rule_name
        self.selection = TensorSelection(rule, collection_names, tensor_regex, select_all_if_empty=False)
        tokens = [parse_float(rule, "token_values", t) for t in self._list("token_values", token_values)]
        thresholds = [
            parse_float(rule, "token_thresholds_percent", t, minimum=0.0, maximum=100.0)
            for t in self._list("token_thresholds_percent", token_thresholds_percent)
        ]
        if len(set(tokens)) != len(tokens):
            raise RuleParameterError(rule, "token_values", token_values, "a token is listed twice")
        if len(thresholds) == 1:
            thresholds = thresholds * len(tokens)
        if len(thresholds) != len(tokens):
            raise RuleParameterError(
                rule, "token_thresholds_percent", token_thresholds_percent,
                f"expected one threshold or one per token ({len(tokens)})",
            )
        self.thresholds: dict[float, float] = {float(t): float(p) for t, p in zip(tokens, thresholds, strict=True)}  # type: ignore[arg-type]

    def _list(self, name: str, value: object) -> tuple[str, ...]:
        """A comma list, a number or a list of numbers (in-process callers), as strings."""
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)
        elif isinstance(value, (list, tuple)):
            value = [str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v for v in value]
        items = parse_str_list(self.rule_name, name, value)
        if not items:
            raise RuleParameterError(self.rule_name, name, value, "a value is required")
        return items

    def invoke_at_step(self, step: int) -> Verdict:
        verdict = Verdict.NOT_EVALUATED
        for name in self.selection.names(self.base_trial, step):
            value = value_or_none(self.base_trial.tensor(name), step)
            if value is None:
                continue
            flat = value.astype(np.float64).ravel()
            flat = flat[~np.isnan(flat)]
            if flat.size == 0:
                continue
            verdict = Verdict.CONDITION_NOT_MET
            for token, threshold in self.thresholds.items():
                percent = 100.0 * float(np.count_nonzero(flat == token)) / float(flat.size)
                if percent > threshold:
                    self.logger.debug("%s: token %g is %.1f %% of %s at step %d", self.rule_name, token, percent, name, step)
                    return Verdict.CONDITION_MET
        return verdict
