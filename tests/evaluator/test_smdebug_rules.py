"""smdebug's rule semantics: `Rule.invoke(step)` raises RuleEvaluationConditionMet (and missing
data) as smdebug's does, `invoke_rule(rule, start_step, end_step, raise_eval_cond)`, the trials
frozen while a step is judged; and what the evaluator loop keeps from them: one storage listing
per poll, nothing per step, and a rule asking past the last step completes."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sdlocal.evaluator.loop import evaluate
from sdlocal.evaluator.rule import Rule, RuleEvaluationConditionMet, Verdict
from sdlocal.evaluator.rule_invoker import invoke_rule
from sdlocal.evaluator.rules import VanishingGradient
from sdlocal.evaluator.status import Status
from sdlocal.trial import TrialWriter, create_trial
from sdlocal.trial.errors import NoMoreData, StepUnavailable, TensorUnavailable, TensorUnavailableForStep
from sdlocal.trial.trial import Trial
from tests.evaluator._trials import Clock, make_trial, train_steps, write_steps
from tests.trial.test_live import CountingStorage


class AboveThreshold(Rule):
    """A custom rule as smdebug's documentation writes them: True when the mean of `x` > threshold."""

    def __init__(self, base_trial: Any, threshold: str = "1.0", action_str: str = "") -> None:
        super().__init__(base_trial, action_str=action_str)
        self.threshold = float(threshold)
        self.seen: list[int] = []

    def set_required_tensors(self, step: int) -> None:
        self.req_tensors.add("x", steps=[step])

    def invoke_at_step(self, step: int) -> bool:
        self.seen.append(step)
        return float(np.mean(self.req_tensors.get()[0].value(step))) > self.threshold


def x_trial(root: Path, values: dict[int, float], *, end: bool = True) -> Trial:
    return make_trial(root, [(s, "TRAIN", s, {"x": np.full(2, v), "y": np.zeros(1)}) for s, v in values.items()], end=end)


def test_invoke_raises_when_the_condition_is_met(tmp_path: Path) -> None:
    rule = AboveThreshold(x_trial(tmp_path, {0: 0.5, 1: 5.0}))
    assert rule.invoke(0) is None
    with pytest.raises(RuleEvaluationConditionMet) as met:
        rule.invoke(1)
    assert (met.value.rule_name, met.value.step, met.value.end_of_rule) == ("AboveThreshold", 1, False)
    assert str(met.value) == "Evaluation of the rule AboveThreshold at step 1 resulted in the condition being met"
    assert rule.report["RuleTriggered"] == 1 and rule.report["Datapoints"] == 2


def test_invoke_lets_missing_data_raise(tmp_path: Path) -> None:
    trial = make_trial(tmp_path, [(0, "TRAIN", 0, {"x": np.ones(1)}), (1, "TRAIN", 1, {"y": np.ones(1)}),
                                  (3, "TRAIN", 3, {"x": np.ones(1)})])
    rule = AboveThreshold(trial)
    with pytest.raises(TensorUnavailableForStep):
        rule.invoke(1)
    with pytest.raises(StepUnavailable):
        rule.invoke(2)
    with pytest.raises(NoMoreData):
        rule.invoke(4)  # past the end of a finished training

    class NeedsZ(AboveThreshold):
        def set_required_tensors(self, step: int) -> None:
            self.req_tensors.add("z", steps=[step])

    with pytest.raises(TensorUnavailable):
        NeedsZ(trial).invoke(0)


def test_verdict_rules_through_invoke(tmp_path: Path) -> None:
    trial = make_trial(tmp_path, train_steps([{"gradient/a": np.full((2, 2), 1e-9)}, {"gradient/a": np.ones((2, 2))}]))
    rule = VanishingGradient(trial)  # a built-in rule answering Verdicts
    with pytest.raises(RuleEvaluationConditionMet):
        rule.invoke(0)
    rule.invoke(1)  # CONDITION_NOT_MET: no exception


def test_invoke_rule(tmp_path: Path) -> None:
    values = {0: 0.0, 1: 0.0, 3: 5.0, 4: 0.0, 5: 7.0}  # step 2 was not saved
    rule = AboveThreshold(x_trial(tmp_path / "a", values))
    invoke_rule(rule)  # to the end of the finished training: completes, no NoMoreData
    assert rule.seen == [0, 1, 3, 4, 5] and rule.report["RuleTriggered"] == 2
    rule = AboveThreshold(x_trial(tmp_path / "b", values))
    invoke_rule(rule, start_step=1, end_step=4)
    assert rule.seen == [1, 3]
    rule = AboveThreshold(x_trial(tmp_path / "c", values))
    with pytest.raises(RuleEvaluationConditionMet) as met:
        invoke_rule(rule, start_step=None, raise_eval_cond=True)
    assert met.value.step == 3 and rule.seen == [0, 1, 3]


def test_invoke_rule_stops_at_end_of_rule(tmp_path: Path) -> None:
    class StopsAtFirst(AboveThreshold):
        def invoke_at_step(self, step: int) -> bool:
            if super().invoke_at_step(step):
                raise RuleEvaluationConditionMet(self.rule_name, step, end_of_rule=True)
            return False

    rule = StopsAtFirst(x_trial(tmp_path, {0: 0.0, 1: 9.0, 2: 9.0}))
    invoke_rule(rule)
    assert rule.seen == [0, 1]


def test_invoke_freezes_the_trials_while_judging(tmp_path: Path) -> None:
    trial = x_trial(tmp_path, {0: 0.0, 1: 0.0}, end=False)
    writer = TrialWriter(tmp_path)
    views: list[list[int]] = []

    class WritesMeanwhile(AboveThreshold):
        def invoke_at_step(self, step: int) -> bool:
            writer.write_step(step + 2, "TRAIN", step + 2, [("x", np.zeros(2))])  # training goes on meanwhile
            views.append(self.base_trial.steps())
            views.append(self.base_trial.tensor("x").steps())
            return False

    rule = WritesMeanwhile(trial)
    rule.invoke(1)
    assert views == [[0, 1], [0, 1]]
    assert trial.steps() == [0, 1, 3] and trial.dynamic_refresh  # refreshing again after the step


def test_loop_lists_once_per_poll_not_per_step(tmp_path: Path) -> None:
    write_steps(tmp_path, [(s, "TRAIN", s, {"x": np.full(2, float(s)), "y": np.zeros(1)}) for s in range(30)])
    storage = CountingStorage(tmp_path)
    trial = Trial(storage)
    status = evaluate(trial, AboveThreshold(trial, threshold="100"), sleep=lambda s: None, clock=Clock())
    assert status.status is Status.NO_ISSUES_FOUND and status.last_evaluated_step == 29
    assert [c for c in storage.calls if c[0] == "list" and c[1] == "index/"] == [("list", "index/", "None")]

    live = tmp_path / "live"
    write_steps(live, [(s, "TRAIN", s, {"x": np.zeros(2), "y": np.zeros(1)}) for s in range(10)], end=False)
    storage = CountingStorage(live)
    trial = Trial(storage)
    polls = [0]

    def sleep(seconds: float) -> None:
        polls[0] += 1
        if polls[0] == 2:
            TrialWriter(live).write_end_marker()

    evaluate(trial, AboveThreshold(trial, threshold="100"), sleep=sleep, clock=Clock())
    index_lists = [c for c in storage.calls if c[0] == "list" and c[1] == "index/"]
    assert len(index_lists) == polls[0] + 1  # one per poll, none for the 10 steps judged


def test_a_rule_asking_past_the_last_step_completes(tmp_path: Path) -> None:
    class NextStep(AboveThreshold):
        def set_required_tensors(self, step: int) -> None:
            self.req_tensors.add("x", steps=[step, step + 1])  # the next step too

    trial = x_trial(tmp_path, {0: 0.0, 1: 5.0, 2: 0.0})
    status = evaluate(trial, NextStep(trial), sleep=lambda s: None, clock=Clock())
    assert status.status is Status.ISSUES_FOUND and status.last_evaluated_step == 2  # not Error at step 2
    rule = NextStep(create_trial(tmp_path))
    assert rule.judge_step(2) is Verdict.NOT_EVALUATED
    invoke_rule(rule)  # the same rule through smdebug's invoker completes too
    assert rule.seen == [0, 1]
