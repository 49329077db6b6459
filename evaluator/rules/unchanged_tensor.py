"""UnchangedTensor: tensors that stopped changing."""
from __future__ import annotations

from typing import Any

import numpy as np

from sdlocal.evaluator.params import parse_bool, parse_float, parse_int
from sdlocal.evaluator.rule import Rule, Verdict
from sdlocal.evaluator.rules._select import TensorSelection, value_or_none


class UnchangedTensor(Rule):
    """Fires when an inspected tensor stays `numpy.allclose` over its last `num_steps` saved values.

    `numpy.allclose(rtol, atol, equal_nan)` must hold between each pair of consecutive values
    among the last `num_steps` saved values of the tensor, ending at this step.

    Inspects `collection_names` ∪ `tensor_regex`; with neither, every floating-point tensor
    (choice: integer tensors are discrete data — labels, predicted class ids, token ids — and an
    untrained classifier predicting the same class ids for a few batches is not a stalled tensor;
    named explicitly, they are judged like any other). Choices:
    values are compared within one mode (weights seen at EVAL steps equal the preceding TRAIN
    step's, which is not a stall); a tensor with fewer than `num_steps` saved values so far, or
    whose shape changed, is not judged.
    """

    group = "universal"

    def __init__(
        self,
        base_trial: Any,
        collection_names: object = None,
        tensor_regex: object = None,
        num_steps: object = 3,
        rtol: object = 1e-5,
        atol: object = 1e-8,
        equal_nan: object = False,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, action_str=action_str)
        rule = self.rule_name
        self.selection = TensorSelection(rule, collection_names, tensor_regex)
        self.num_steps = int(parse_int(rule, "num_steps", num_steps, minimum=2))  # type: ignore[arg-type]
        self.rtol = float(parse_float(rule, "rtol", rtol, minimum=0.0))  # type: ignore[arg-type]
        self.atol = float(parse_float(rule, "atol", atol, minimum=0.0))  # type: ignore[arg-type]
        self.equal_nan = parse_bool(rule, "equal_nan", equal_nan)
        # (tensor name, mode) -> global steps at which it was seen, newest last (num_steps kept)
        self._history: dict[tuple[str, int], list[int]] = {}

    def _unchanged(self, tensor: Any, steps: list[int]) -> bool:
        values = [value_or_none(tensor, s) for s in steps]
        if any(v is None for v in values):
            return False
        for prev, cur in zip(values, values[1:], strict=False):
            assert prev is not None and cur is not None
            if prev.shape != cur.shape:
                return False
            if not np.allclose(prev, cur, rtol=self.rtol, atol=self.atol, equal_nan=self.equal_nan):
                return False
        return True

    def invoke_at_step(self, step: int) -> Verdict:
        mode, _ = self.base_trial.mode_modestep(step)
        verdict = Verdict.NOT_EVALUATED
        fired = False
        for name in self.selection.names(self.base_trial, step):
            tensor = self.base_trial.tensor(name)
            value = value_or_none(tensor, step)
            if value is None or (self.selection.empty and not np.issubdtype(value.dtype, np.inexact)):
                continue
            history = self._history.setdefault((name, int(mode or 0)), [])
            if not history or history[-1] != step:
                history.append(step)
            del history[: -self.num_steps]
            if len(history) < self.num_steps:
                continue
            verdict = Verdict.CONDITION_NOT_MET
            # keep updating every tensor's history even after one fired
            if not fired and self._unchanged(tensor, history):
                self.logger.debug("%s: %s unchanged over steps %s", self.rule_name, name, history)
                fired = True
        return Verdict.CONDITION_MET if fired else verdict
