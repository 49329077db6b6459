"""The rule API, compatible with smdebug's `smdebug.rules.rule.Rule` so that published custom rules
run unchanged, but returning verdicts instead of raising `RuleEvaluationConditionMet`.

A rule subclass implements `invoke_at_step(step) -> bool` (True: the condition is met at this
global step) and optionally `set_required_tensors(step)`, which declares through
`self.req_tensors.add(...)` what `invoke` fetches before calling `invoke_at_step`.
"""
from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from trial.errors import StepUnavailable, TensorUnavailable, TensorUnavailableForStep

# Missing data at one step is not an error: that step is simply "not evaluated".
MISSING_DATA_ERRORS: tuple[type[Exception], ...] = (
    TensorUnavailable,
    TensorUnavailableForStep,
    StepUnavailable,
)


class Verdict(enum.Enum):
    CONDITION_MET = "condition_met"
    CONDITION_NOT_MET = "condition_not_met"
    NOT_EVALUATED = "not_evaluated"

    @property
    def fired(self) -> bool:
        return self is Verdict.CONDITION_MET


def as_verdict(result: object) -> Verdict:
    """A rule's answer (True/False or a `Verdict`) as a `Verdict`."""
    if isinstance(result, Verdict):
        return result
    return Verdict.CONDITION_MET if result else Verdict.CONDITION_NOT_MET


class RuleEvaluationConditionMet(Exception):
    """smdebug's way of signalling a met condition. Custom rules written for smdebug may raise it
    from `invoke_at_step`; `Rule.invoke` turns it into `Verdict.CONDITION_MET`."""

    def __init__(self, rule_name: str, step: int, last_step: bool = False) -> None:
        self.rule_name = rule_name
        self.step = step
        self.last_step = last_step
        super().__init__(
            f"Evaluation of the rule {rule_name} at step {step} resulted in the condition being met"
        )


class _RequiredTensorsForTrial:
    def __init__(self, trial: Any) -> None:
        self.trial = trial
        self._tensor_steps: dict[str, list[int]] = {}

    def add(self, name: str, steps: Iterable[int], should_match_regex: bool = False) -> None:
        steps = list(steps)
        if should_match_regex:
            names = self.trial.tensor_names(regex=[name])
        else:
            if not self.trial.has_tensor(name):
                raise TensorUnavailable(name)
            names = [name]
        for tname in names:
            self._tensor_steps.setdefault(tname, []).extend(steps)

    def names(self) -> list[str]:
        return list(self._tensor_steps)

    def steps_of(self, name: str) -> list[int]:
        return self._tensor_steps[name]

    def get(self) -> list[Any]:
        return [self.trial.tensor(name) for name in self._tensor_steps]

    def clear(self) -> None:
        self._tensor_steps.clear()

    def fetch(self) -> None:
        # Reading each value once warms the trial's cache and surfaces missing data before
        # invoke_at_step runs (raises TensorUnavailableForStep / StepUnavailable).
        for name, steps in self._tensor_steps.items():
            tensor = self.trial.tensor(name)
            for step in sorted(set(steps)):
                tensor.value(step)


class RequiredTensors:
    """What a rule needs at a step, per trial (smdebug's `RequiredTensors`)."""

    def __init__(self, base_trial: Any, other_trials: Sequence[Any] | None = None) -> None:
        self.base_trial = base_trial
        self._per_trial: dict[int, _RequiredTensorsForTrial] = {id(base_trial): _RequiredTensorsForTrial(base_trial)}
        for other in other_trials or ():
            self._per_trial[id(other)] = _RequiredTensorsForTrial(other)

    def _for(self, trial: Any) -> _RequiredTensorsForTrial:
        trial = self.base_trial if trial is None else trial
        try:
            return self._per_trial[id(trial)]
        except KeyError:
            raise ValueError("trial is neither the base trial nor one of the other trials") from None

    def add(self, name: str, steps: Iterable[int], trial: Any = None, should_match_regex: bool = False) -> None:
        self._for(trial).add(name, steps, should_match_regex=should_match_regex)

    def get_names(self, trial: Any = None) -> list[str]:
        return self._for(trial).names()

    def get_tensor_steps(self, name: str, trial: Any = None) -> list[int]:
        return self._for(trial).steps_of(name)

    def get(self, trial: Any = None) -> list[Any]:
        """The required Tensor objects of a trial (base trial by default)."""
        return self._for(trial).get()

    def clear(self) -> None:
        for per_trial in self._per_trial.values():
            per_trial.clear()

    def fetch(self) -> None:
        for per_trial in self._per_trial.values():
            per_trial.fetch()


class Rule:
    """Base class of every rule, built-in or custom.

    Accepts smdebug's signatures: `Rule(base_trial, action_str, other_trials=None)` and the older
    `super().__init__(base_trial)`. `action_str` is kept (`self.action_str`); the evaluator runs
    its actions the first time the rule fires (evaluator/actions.py), not the rule.
    """

    def __init__(self, base_trial: Any, action_str: str = "", other_trials: Sequence[Any] | None = None) -> None:
        self.base_trial = base_trial
        self.other_trials = list(other_trials) if other_trials is not None else None
        self.trials = [base_trial, *(self.other_trials or [])]
        self.action_str = action_str or ""
        self.req_tensors = RequiredTensors(base_trial, self.other_trials)
        self.rule_name = self.__class__.__name__
        self.logger = logging.getLogger(f"evaluator.rules.{self.rule_name}")
        self.report: dict[str, Any] = {
            "RuleTriggered": 0,
            "Violations": 0,
            "Details": {},
            "Datapoints": 0,
            "RuleParameters": "",
        }

    def set_required_tensors(self, step: int) -> None:
        """Declare the tensors `invoke_at_step(step)` needs (optional)."""

    def invoke_at_step(self, step: int) -> bool | Verdict:
        """True (or Verdict.CONDITION_MET) when the rule's condition is met at this global step."""
        raise NotImplementedError(f"{self.rule_name} must implement invoke_at_step(step)")

    def invoke(self, step: int) -> Verdict:
        """Fetch the required tensors for `step`, then evaluate it. Missing data (a tensor or step
        that was not saved) gives `Verdict.NOT_EVALUATED`; any other exception propagates."""
        self.logger.debug("Invoking rule %s for step %s", self.rule_name, step)
        try:
            self.req_tensors.clear()
            self.set_required_tensors(step)
            self.req_tensors.fetch()
        except MISSING_DATA_ERRORS as exc:
            self.logger.debug("Rule %s: step %s not evaluated: %s", self.rule_name, step, exc)
            return Verdict.NOT_EVALUATED
        return self.judge(self.invoke_at_step, step)

    def judge(self, check: Callable[..., object], *args: Any) -> Verdict:
        """Run one of the rule's judgements (`invoke_at_step(step)`, `invoke_at_end()`) and count
        its verdict in `report`. It may answer a bool or a `Verdict`, or raise smdebug's
        `RuleEvaluationConditionMet`; missing data gives `Verdict.NOT_EVALUATED`; any other
        exception propagates."""
        try:
            result = check(*args)
        except RuleEvaluationConditionMet:
            result = True
        except MISSING_DATA_ERRORS as exc:
            self.logger.debug("Rule %s: not evaluated: %s", self.rule_name, exc)
            return Verdict.NOT_EVALUATED
        verdict = as_verdict(result)
        if verdict.fired:
            self.report["RuleTriggered"] += 1
            self.report["Violations"] += 1
        if verdict is not Verdict.NOT_EVALUATED:
            self.report["Datapoints"] += 1
        return verdict

