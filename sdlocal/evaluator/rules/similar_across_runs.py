"""SimilarAcrossRuns: the same tensor differs between two runs."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sdlocal.evaluator.errors import RuleParameterError
from sdlocal.evaluator.rule import Rule, Verdict
from sdlocal.evaluator.rules._select import TensorSelection, value_or_none
from sdlocal.trial.modes import ModeKeys


class SimilarAcrossRuns(Rule):
    """Fires when an inspected tensor differs, at the same step, between the base trial and one
    of `other_trials` (required: the `other_trials` / `other_trial_<i>` RuleParameters).

    Choices:
    - "The same step" is the same mode and mode step (two runs of one script agree on them;
      a run whose EVAL passes fall elsewhere still compares like with like). Steps saved without
      a mode (GLOBAL) are matched by global step.
    - "Differs" is `not numpy.allclose(base, other, rtol=1e-5, atol=1e-8, equal_nan=True)`, or a
      different shape: float noise from a different thread count is not a difference, NaN at the
      same place in both runs is the same value.
    - Inspects `collection_names` ∪ `tensor_regex`; with neither, every tensor of the base trial.
    - A tensor or step the other trial does not have (yet) is not compared; a step with nothing
      compared is not evaluated. A live other trial is refreshed when it lacks the step.
    """

    group = "universal"

    rtol = 1e-5
    atol = 1e-8

    def __init__(
        self,
        base_trial: Any,
        collection_names: object = None,
        tensor_regex: object = None,
        other_trials: Sequence[Any] | None = None,
        action_str: str = "",
    ) -> None:
        if not other_trials:
            raise RuleParameterError(
                type(self).__name__, "other_trials", other_trials, "another trial to compare with is required"
            )
        super().__init__(base_trial, action_str=action_str, other_trials=other_trials)
        self.selection = TensorSelection(self.rule_name, collection_names, tensor_regex)

    def _other_step(self, other: Any, step: int) -> int | None:
        mode, mode_step = self.base_trial.mode_modestep(step)
        for attempt in range(2):
            if mode is None or mode is ModeKeys.GLOBAL or mode_step is None:
                found: int | None = step if step in other.steps() else None
            else:
                found = other.global_step(mode, mode_step)
            if found is not None or attempt:
                return found
            other.refresh()
        return None

    def _differs(self, base: np.ndarray, other: np.ndarray) -> bool:
        if base.shape != other.shape:
            return True
        try:
            return not np.allclose(base, other, rtol=self.rtol, atol=self.atol, equal_nan=True)
        except TypeError:  # non-numeric values (strings): exact comparison
            return not np.array_equal(base, other)

    def invoke_at_step(self, step: int) -> Verdict:
        verdict = Verdict.NOT_EVALUATED
        names = self.selection.names(self.base_trial, step)
        for other in self.other_trials or ():
            other_step = self._other_step(other, step)
            if other_step is None:
                continue
            for name in names:
                if not other.has_tensor(name):
                    continue
                base_value = value_or_none(self.base_trial.tensor(name), step)
                other_value = value_or_none(other.tensor(name), other_step)
                if base_value is None or other_value is None:
                    continue
                if self._differs(base_value, other_value):
                    self.logger.debug("%s: %s differs at step %d from %s", self.rule_name, name, step, other)
                    return Verdict.CONDITION_MET
                verdict = Verdict.CONDITION_NOT_MET
        return verdict
