"""The rule API: smdebug's `smdebug.rules.rule.Rule`, so that published custom rules run unchanged.

A rule subclass implements `invoke_at_step(step) -> bool` (True: the condition is met at this
global step; sdlocal's built-in rules answer a `Verdict`) and optionally
`set_required_tensors(step)`, which declares through `self.req_tensors.add(...)` what is fetched
before `invoke_at_step` runs.

Two ways to judge a step:
- `invoke(step)` is smdebug's: it waits for the step, judges it with the trials frozen
  (`no_refresh`), raises `RuleEvaluationConditionMet` when the condition is met and lets missing
  data raise (`invoke_rule`, evaluator/rule_invoker.py, skips such steps).
- `judge_step(step) -> Verdict` is the evaluator loop's: no waiting (the loop hands it complete
  steps), missing data is `Verdict.NOT_EVALUATED`, a met condition is `Verdict.CONDITION_MET`.
"""
from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from sdlocal.trial.errors import (
    NoMoreData,
    RuleEvaluationConditionMet,
    ShapeUnavailableForStep,
    StepUnavailable,
    TensorUnavailable,
    TensorUnavailableForStep,
)
from sdlocal.trial.refresh import no_refresh

# Missing data at one step is not an error: that step is simply "not evaluated". NoMoreData: the
# rule asked for a step past the end of a finished training.
MISSING_DATA_ERRORS: tuple[type[Exception], ...] = (
    TensorUnavailable,
    TensorUnavailableForStep,
    ShapeUnavailableForStep,
    StepUnavailable,
    NoMoreData,
)

__all__ = ["MISSING_DATA_ERRORS", "DefaultCollection", "RequiredTensors", "RequiredTensorsForTrial", "Rule",
           "RuleEvaluationConditionMet", "RuleKind", "Verdict", "as_verdict"]


class RuleKind(str, enum.Enum):
    """A rule's kind, in SageMaker's words: which list of the request names it and what its
    evaluator iterates. Debugger rules (DebugRuleConfigurations) judge the steps of the
    debug-output trial; profiler rules (ProfilerRuleConfigurations) judge windows of time of the
    profiler-output (evaluator/profiler_rule.py)."""

    DEBUGGER = "debugger"
    PROFILER = "profiler"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class DefaultCollection:
    """A collection a built-in tensor rule reads, saved by the hook when the rule is attached
    (the launcher merges these with the user's CollectionConfigurations, launcher/spec/collection_configs.py)."""

    name: str
    parameters: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, name: str, parameters: Mapping[str, str] | None = None) -> DefaultCollection:
        return cls(name, tuple((parameters or {}).items()))

    @property
    def parameter_map(self) -> dict[str, str]:
        return dict(self.parameters)


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


class RequiredTensorsForTrial:
    """What a rule needs at a step from one trial: tensor names and their steps."""

    def __init__(self, trial: Any) -> None:
        self.trial = trial
        self._tensor_steps: dict[str, list[int]] = {}
        self._tensors: dict[str, Any] = {}

    def _add_steps_for_tensor(self, name: str, steps: list[int]) -> None:
        self._tensor_steps.setdefault(name, []).extend(steps)
        if name not in self._tensors:
            self._tensors[name] = self.trial.tensor(name)

    def add(self, name: str, steps: Iterable[int], should_match_regex: bool = False) -> None:
        """Require `name` (or, with `should_match_regex`, every tensor matching it) at `steps`;
        TensorUnavailable when the trial has no such tensor."""
        steps = list(steps)
        if should_match_regex:
            for tname in self.trial.tensor_names(regex=[name]):
                self._add_steps_for_tensor(tname, steps)
        else:
            if not self.trial.has_tensor(name):
                raise TensorUnavailable(name)
            self._add_steps_for_tensor(name, steps)

    def get_names(self) -> list[str]:
        return list(self._tensor_steps)

    names = get_names

    def get_tensor_steps(self, name: str) -> list[int]:
        return self._tensor_steps[name]

    steps_of = get_tensor_steps

    def get(self) -> list[Any]:
        return list(self._tensors.values())

    def clear(self) -> None:
        self._tensor_steps.clear()
        self._tensors.clear()

    def fetch(self, wait: bool = False) -> None:
        """Read each required value once: warms the trial's cache and surfaces missing data
        (TensorUnavailableForStep, StepUnavailable) before invoke_at_step runs. `wait` (smdebug's
        `Rule.invoke`): first wait until the required steps are complete."""
        if wait:
            required = sorted({s for steps in self._tensor_steps.values() for s in steps})
            if required:
                self.trial.wait_for_steps(required)
        for name, steps in self._tensor_steps.items():
            tensor = self._tensors[name]
            for step in sorted(set(steps)):
                tensor.value(step)


_RequiredTensorsForTrial = RequiredTensorsForTrial


class RequiredTensors:
    """What a rule needs at a step, per trial (smdebug's `RequiredTensors`)."""

    def __init__(self, base_trial: Any, other_trials: Sequence[Any] | None = None) -> None:
        self.base_trial = base_trial
        self._per_trial: dict[int, RequiredTensorsForTrial] = {id(base_trial): RequiredTensorsForTrial(base_trial)}
        for other in other_trials or ():
            self._per_trial[id(other)] = RequiredTensorsForTrial(other)

    def _for(self, trial: Any) -> RequiredTensorsForTrial:
        trial = self.base_trial if trial is None else trial
        try:
            return self._per_trial[id(trial)]
        except KeyError:
            raise ValueError("trial is neither the base trial nor one of the other trials") from None

    def add(self, name: str, steps: Iterable[int], trial: Any = None, should_match_regex: bool = False) -> None:
        self._for(trial).add(name, steps, should_match_regex=should_match_regex)

    def get_names(self, trial: Any = None) -> list[str]:
        return self._for(trial).get_names()

    def get_tensor_steps(self, name: str, trial: Any = None) -> list[int]:
        return self._for(trial).get_tensor_steps(name)

    def get(self, trial: Any = None) -> list[Any]:
        """The required Tensor objects of a trial (base trial by default)."""
        return self._for(trial).get()

    def clear(self) -> None:
        for per_trial in self._per_trial.values():
            per_trial.clear()

    def fetch(self, wait: bool = False) -> None:
        for per_trial in self._per_trial.values():
            per_trial.fetch(wait=wait)


class Rule:
    """Base class of every rule, built-in or custom.

    Accepts smdebug's signatures: `Rule(base_trial, action_str, other_trials=None)` and the older
    `super().__init__(base_trial)`. `action_str` is kept (`self.action_str`); the evaluator runs
    its actions the first time the rule fires (evaluator/actions.py), not the rule.

    Metadata the registry and the launcher read from the class: `kind` (RuleKind.DEBUGGER here; PROFILER for
    `sdlocal.evaluator.profiler_rule.ProfilerRule`), `default_collections` (what the hook must save for a
    built-in rule: smdebug_rulesconfig's ruleConfigs.json entries first, then the collections the
    rule reads that ruleConfigs.json leaves out) and, for built-ins, `group` (rules.md's groups).
    """

    # the collections the request named (evaluator.registry sets it): see evaluator/loop.py
    requested_collections: tuple[str, ...] = ()
    kind: ClassVar[RuleKind] = RuleKind.DEBUGGER
    default_collections: ClassVar[tuple[DefaultCollection, ...]] = ()

    def __init__(self, base_trial: Any, action_str: str = "", other_trials: Sequence[Any] | None = None) -> None:
        self.base_trial = base_trial
        self.other_trials = list(other_trials) if other_trials is not None else None
        self.trials = [base_trial, *(self.other_trials or [])]
        self.action_str = action_str or ""
        self.req_tensors = RequiredTensors(base_trial, self.other_trials)
        self.rule_name = self.__class__.__name__
        self.logger = logging.getLogger(f"sdlocal.evaluator.rules.{self.rule_name}")
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

    def invoke(self, step: int) -> None:
        """smdebug's: wait until `step` is complete (StepUnavailable if it was skipped, NoMoreData
        past the end of a finished training), fetch the required tensors and call
        `invoke_at_step(step)` with the trials frozen (`no_refresh`), then raise
        `RuleEvaluationConditionMet(rule_name, step)` when the condition is met. Missing data
        raises (TensorUnavailable, TensorUnavailableForStep, ...). The verdict counts in `report`.
        Actions (`action_str`) are not run here: sdlocal's evaluator runs them when the rule fires."""
        self.logger.debug("Invoking rule %s for step %s", self.rule_name, step)
        self.base_trial.wait_for_steps([step])
        with no_refresh(self.trials):
            self.req_tensors.clear()
            self.set_required_tensors(step)
            self.req_tensors.fetch(wait=True)
            try:
                result = self.invoke_at_step(step)
            except RuleEvaluationConditionMet:
                self._count(Verdict.CONDITION_MET)
                raise
        verdict = self._count(as_verdict(result))
        if verdict.fired:
            raise RuleEvaluationConditionMet(self.rule_name, step)

    def judge_step(self, step: int) -> Verdict:
        """The evaluator loop's way to judge a complete step: fetch the required tensors, then
        `invoke_at_step(step)`. Missing data (a tensor or step that was not saved) gives
        `Verdict.NOT_EVALUATED`; any other exception propagates. Does not wait and does not freeze
        the trials itself (the loop judges a poll's steps inside `no_refresh`)."""
        self.logger.debug("Judging rule %s at step %s", self.rule_name, step)
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
        return self._count(as_verdict(result))

    def _count(self, verdict: Verdict) -> Verdict:
        if verdict.fired:
            self.report["RuleTriggered"] += 1
            self.report["Violations"] += 1
        if verdict is not Verdict.NOT_EVALUATED:
            self.report["Datapoints"] += 1
        return verdict

