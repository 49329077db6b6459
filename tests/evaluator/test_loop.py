"""The loop on real local trials that grow while it runs: the injected `sleep` writes the next
steps (deterministic, no timing), and a fake clock drives the deadlines."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from sdlocal.evaluator.loop import evaluate
from sdlocal.evaluator.rule import Rule, RuleEvaluationConditionMet, Verdict
from sdlocal.evaluator.rules import ExplodingTensor
from sdlocal.evaluator.status import RuleStatus, Status
from sdlocal.trial import TrialWriter, create_trial
from tests.evaluator._trials import COLLECTIONS, Clock

W = "Net_fc1.weight"


def grower(root: Path, batches: list[list[float]], clock: Clock, *, end: bool = True) -> Callable[[float], None]:
    """A `sleep` that advances the clock and writes the next batch of steps (one value per step)."""
    writer = TrialWriter(root)
    state = {"step": 0, "batch": 0}

    def sleep(seconds: float) -> None:
        clock.now += seconds
        if state["batch"] < len(batches):
            for v in batches[state["batch"]]:
                writer.write_step(state["step"], "TRAIN", state["step"], [(W, np.full(2, v, np.float32))])
                state["step"] += 1
            state["batch"] += 1
        elif end:
            writer.write_end_marker()

    return sleep


class Recording(Rule):
    def __init__(self, base_trial, fire_at=()):  # type: ignore[no-untyped-def]
        super().__init__(base_trial)
        self.fire_at = set(fire_at)
        self.seen: list[int] = []

    def invoke_at_step(self, step: int) -> bool:
        self.seen.append(step)
        return step in self.fire_at


def run(tmp_path: Path, batches: list[list[float]], rule_factory, **kwargs):  # type: ignore[no-untyped-def]
    TrialWriter(tmp_path).write_collections(COLLECTIONS)
    clock = kwargs.pop("clock", None) or Clock()
    statuses: list[RuleStatus] = []
    trial = create_trial(str(tmp_path))
    rule = rule_factory(trial)
    final = evaluate(trial, rule, interval=1.0, clock=clock,
                     sleep=kwargs.pop("sleep", None) or grower(tmp_path, batches, clock, end=kwargs.pop("end", True)),
                     on_status=statuses.append, **kwargs)
    return final, statuses, rule


def test_live_trial_each_step_once_in_order(tmp_path: Path) -> None:
    final, statuses, rule = run(tmp_path, [[1, 2], [], [3, 4, 5]], lambda t: Recording(t))
    assert rule.seen == [0, 1, 2, 3, 4]
    assert statuses[0].status is Status.IN_PROGRESS and statuses[0].last_evaluated_step is None
    assert [s.status for s in statuses].count(Status.NO_ISSUES_FOUND) == 1
    assert final.status is Status.NO_ISSUES_FOUND and final.last_evaluated_step == 4
    assert final.rule_configuration_name == "Recording"
    # written on change only: progress updates carry a new LastEvaluatedStep each time
    steps = [s.last_evaluated_step for s in statuses]
    assert all(a != b or sa.status != sb.status for a, b, sa, sb in zip(steps, steps[1:], statuses, statuses[1:], strict=False))


def test_issues_found_as_soon_as_it_fires_and_evaluation_goes_on(tmp_path: Path) -> None:
    final, statuses, rule = run(tmp_path, [[1.0], [np.nan], [1.0, np.nan]], lambda t: ExplodingTensor(t))
    first_issue = next(i for i, s in enumerate(statuses) if s.status is Status.ISSUES_FOUND)
    assert statuses[first_issue].last_evaluated_step == 1
    assert "rule ExplodingTensor at step 1 resulted" in statuses[first_issue].status_details
    assert all(s.status is Status.IN_PROGRESS for s in statuses[:first_issue])
    assert final.status is Status.ISSUES_FOUND and final.last_evaluated_step == 3
    assert "at step 1 " in final.status_details  # the first step that fired


def test_start_and_end_step(tmp_path: Path) -> None:
    final, _, rule = run(tmp_path, [[0, 1, 2, 3], [4, 5, 6, 7]], lambda t: Recording(t), start_step=2, end_step=6, end=False)
    assert rule.seen == [2, 3, 4, 5]
    assert final.status is Status.NO_ISSUES_FOUND  # past end_step: done without the end marker


def test_deadline_gives_error(tmp_path: Path) -> None:
    final, statuses, rule = run(tmp_path, [[1], [2]], lambda t: Recording(t), deadline=10.0, end=False)
    assert final.status is Status.ERROR
    assert final.status_details.startswith("ClientError: Rule Recording did not finish within the deadline of 10 s")
    assert rule.seen == [0, 1] and final.last_evaluated_step == 1


def test_no_collections_before_training_ended(tmp_path: Path) -> None:
    TrialWriter(tmp_path).write_end_marker()
    trial = create_trial(str(tmp_path))
    final = evaluate(trial, Recording(trial), sleep=lambda s: None)
    assert final.status_details == (
        "ClientError: No debugging data was saved by the training job. Check that the debugger hook was "
        "configured correctly before starting the training job. Exception: Training job has ended. All the "
        "collection files could not be loaded"
    )
    assert final.status is Status.ERROR


def test_collections_deadline(tmp_path: Path) -> None:
    clock = Clock()
    trial = create_trial(str(tmp_path))

    def sleep(s: float) -> None:
        clock.now += s

    final = evaluate(trial, Recording(trial), collections_timeout=5, interval=1, clock=clock, sleep=sleep)
    assert final.status is Status.ERROR and "No debugging data was saved" in final.status_details
    assert clock.now == 5


def test_rule_exception_is_error_naming_step(tmp_path: Path) -> None:
    class Broken(Recording):
        def invoke_at_step(self, step: int) -> bool:
            if step == 1:
                raise ZeroDivisionError("division by zero")
            return False

    final, _, _ = run(tmp_path, [[1, 2, 3]], lambda t: Broken(t))
    assert final.status is Status.ERROR
    assert final.status_details == "ClientError: Rule Broken failed at step 1: ZeroDivisionError: division by zero"


def test_stop_request(tmp_path: Path) -> None:
    final, _, rule = run(tmp_path, [[1], [2]], lambda t: Recording(t), stop_requested=lambda: True)
    assert final.status is Status.STOPPED and rule.seen == []


def test_mixed_modes_and_missing_tensors_are_not_errors(tmp_path: Path) -> None:
    writer = TrialWriter(tmp_path)
    writer.write_collections(COLLECTIONS)
    writer.write_step(0, "TRAIN", 0, [(W, np.ones(2)), ("gradient/Net_fc1.weight", np.ones((2, 2)))])
    writer.write_step(1, "EVAL", 0, [(W, np.ones(2))])
    writer.write_step(2, "TRAIN", 1, [(W, np.ones(2)), ("gradient/Net_fc1.weight", np.full((2, 2), 1e-9))])
    writer.write_end_marker()
    trial = create_trial(str(tmp_path))
    from sdlocal.evaluator.rules import VanishingGradient

    final = evaluate(trial, VanishingGradient(trial), sleep=lambda s: None)
    assert final.status is Status.ISSUES_FOUND and "at step 2 " in final.status_details


# ---- time-based rules: invoke_idle -------------------------------------------------------------

class Idle(Recording):
    """Records the idle times the loop reports; fires once idle ≥ 3 s."""

    def __init__(self, base_trial):  # type: ignore[no-untyped-def]
        super().__init__(base_trial)
        self.idle: list[float] = []

    def invoke_idle(self, idle_s: float) -> bool:
        self.idle.append(idle_s)
        return idle_s >= 3


def test_idle_is_called_only_on_polls_without_new_steps(tmp_path: Path) -> None:
    # polls at t=0 (no step), 1 (steps 0,1), 2 (none), 3 (step 2), 4, 5 (none), then the end marker
    final, statuses, rule = run(tmp_path, [[1, 2], [], [3]], lambda t: Idle(t))
    assert rule.seen == [0, 1, 2]
    assert rule.idle == [0.0, 1.0]  # t=0 since start, t=2 since t=1; at t=4 the training had ended
    assert final.status is Status.NO_ISSUES_FOUND


def test_idle_fire_is_issues_found_at_the_last_evaluated_step(tmp_path: Path) -> None:
    clock = Clock()
    stall = grower(tmp_path, [[1, 2]], clock, end=False)
    writer = TrialWriter(tmp_path)

    def sleep(seconds: float) -> None:
        stall(seconds)
        if clock.now >= 8:  # a stop request would end the training
            writer.write_end_marker()

    final, statuses, rule = run(tmp_path, [], lambda t: Idle(t), sleep=sleep, clock=clock)
    fired = [s for s in statuses if s.status is Status.ISSUES_FOUND]
    assert fired[0].status_details.endswith("rule Idle at step 1 resulted in the condition being met")
    assert rule.idle[:4] == [0.0, 1.0, 2.0, 3.0]  # fired at t=4 (3 s after step 1 was seen at t=1)
    assert final.status is Status.ISSUES_FOUND and final.last_evaluated_step == 1


def test_idle_without_any_step_counts_from_the_start(tmp_path: Path) -> None:
    clock = Clock()
    TrialWriter(tmp_path).write_collections(COLLECTIONS)
    trial = create_trial(str(tmp_path))
    rule = Idle(trial)
    final = evaluate(trial, rule, interval=1.0, deadline=5.0, clock=clock,
                     sleep=lambda s: setattr(clock, "now", clock.now + s))
    assert rule.idle == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    # fired (at "step 0": none was evaluated), then the deadline passed without the end marker
    assert final.status is Status.ERROR and "deadline" in final.status_details


def test_idle_not_called_for_ended_or_finished_trials(tmp_path: Path) -> None:
    writer = TrialWriter(tmp_path)
    writer.write_collections(COLLECTIONS)
    writer.write_step(0, "TRAIN", 0, [(W, np.ones(2))])
    writer.write_end_marker()
    trial = create_trial(str(tmp_path))
    rule = Idle(trial)
    final = evaluate(trial, rule, sleep=lambda s: None)
    assert rule.idle == [] and final.status is Status.NO_ISSUES_FOUND


def test_idle_exception_is_error(tmp_path: Path) -> None:
    class BrokenIdle(Idle):
        def invoke_idle(self, idle_s: float) -> bool:
            raise RuntimeError("no clock")

    final, _, _ = run(tmp_path, [[], [1]], lambda t: BrokenIdle(t))
    assert final.status is Status.ERROR
    assert final.status_details == "ClientError: Rule BrokenIdle failed: RuntimeError: no clock"


# ---- rules that judge the whole training: invoke_at_end ------------------------------------------

class AtEnd(Recording):
    """Records when the loop calls invoke_at_end (after which steps); returns `result`."""

    def __init__(self, base_trial, result=False, fire_at=()):  # type: ignore[no-untyped-def]
        super().__init__(base_trial, fire_at=fire_at)
        self.result = result
        self.ends: list[list[int]] = []

    def invoke_at_end(self):  # type: ignore[no-untyped-def]
        self.ends.append(list(self.seen))
        return self.result


def test_at_end_called_once_after_every_step(tmp_path: Path) -> None:
    final, statuses, rule = run(tmp_path, [[1, 2], [], [3]], lambda t: AtEnd(t))
    assert rule.ends == [[0, 1, 2]]  # once, with every step evaluated
    assert final.status is Status.NO_ISSUES_FOUND and final.last_evaluated_step == 2
    assert all(s.status is not Status.ISSUES_FOUND for s in statuses)


@pytest.mark.parametrize("result", [True, Verdict.CONDITION_MET])
def test_at_end_fire_is_issues_found_at_the_last_evaluated_step(tmp_path: Path, result: object) -> None:
    final, statuses, rule = run(tmp_path, [[1, 2], [3]], lambda t: AtEnd(t, result=result))
    assert final.status is Status.ISSUES_FOUND and final.last_evaluated_step == 2
    assert final.status_details.endswith("rule AtEnd at step 2 resulted in the condition being met")
    issues = [s for s in statuses if s.status is Status.ISSUES_FOUND]
    assert issues[0].status_details == final.status_details  # reported before the final status
    assert rule.report["RuleTriggered"] == 1


def test_at_end_not_evaluated_or_not_met_is_silent(tmp_path: Path) -> None:
    final, _, rule = run(tmp_path, [[1]], lambda t: AtEnd(t, result=Verdict.NOT_EVALUATED))
    assert final.status is Status.NO_ISSUES_FOUND and rule.ends == [[0]]
    final, _, rule = run(tmp_path / "b", [[1]], lambda t: AtEnd(t, result=Verdict.CONDITION_NOT_MET))
    assert final.status is Status.NO_ISSUES_FOUND and rule.ends == [[0]]


def test_at_end_keeps_an_earlier_firing_step(tmp_path: Path) -> None:
    final, _, rule = run(tmp_path, [[1, 2, 3]], lambda t: AtEnd(t, result=True, fire_at={1}))
    assert rule.ends == [[0, 1, 2]]
    assert final.status is Status.ISSUES_FOUND and "at step 1 " in final.status_details


def test_at_end_without_any_step_fires_at_step_0(tmp_path: Path) -> None:
    writer = TrialWriter(tmp_path)
    writer.write_collections(COLLECTIONS)
    writer.write_end_marker()
    trial = create_trial(str(tmp_path))
    final = evaluate(trial, AtEnd(trial, result=True), sleep=lambda s: None)
    assert final.status is Status.ISSUES_FOUND and "at step 0 " in final.status_details


def test_at_end_after_end_step_and_assume_ended(tmp_path: Path) -> None:
    final, _, rule = run(tmp_path, [[0, 1, 2, 3], [4, 5]], lambda t: AtEnd(t, result=True), end_step=3, end=False)
    assert rule.ends == [[0, 1, 2]] and "at step 2 " in final.status_details
    writer = TrialWriter(tmp_path / "open")  # no end marker: assume_ended judges what is there
    writer.write_collections(COLLECTIONS)
    writer.write_step(0, "TRAIN", 0, [(W, np.ones(2))])
    trial = create_trial(str(tmp_path / "open"))
    rule = AtEnd(trial)
    assert evaluate(trial, rule, assume_ended=True, sleep=lambda s: None).status is Status.NO_ISSUES_FOUND
    assert rule.ends == [[0]]


def test_at_end_not_called_on_stop_or_deadline_or_error(tmp_path: Path) -> None:
    _, _, rule = run(tmp_path, [[1], [2]], lambda t: AtEnd(t, result=True), stop_requested=lambda: True)
    assert rule.ends == []
    final, _, rule = run(tmp_path / "d", [[1], [2]], lambda t: AtEnd(t, result=True), deadline=10.0, end=False)
    assert final.status is Status.ERROR and "deadline" in final.status_details and rule.ends == []

    class BrokenStep(AtEnd):
        def invoke_at_step(self, step: int) -> bool:
            raise ValueError("bad step")

    final, _, rule = run(tmp_path / "e", [[1]], lambda t: BrokenStep(t, result=True))
    assert final.status is Status.ERROR and rule.ends == []


def test_at_end_exception_is_error(tmp_path: Path) -> None:
    class BrokenEnd(AtEnd):
        def invoke_at_end(self):  # type: ignore[no-untyped-def]
            raise RuntimeError("no matrix")

    final, _, _ = run(tmp_path, [[1, 2]], lambda t: BrokenEnd(t))
    assert final.status is Status.ERROR and final.last_evaluated_step == 1
    assert final.status_details == "ClientError: Rule BrokenEnd failed at the end of training: RuntimeError: no matrix"


def test_at_end_is_judged_as_a_step_is(tmp_path: Path) -> None:
    # smdebug's way of firing counts as a firing, not as a failure of the rule
    class RaisesMet(AtEnd):
        def invoke_at_end(self):  # type: ignore[no-untyped-def]
            raise RuleEvaluationConditionMet(self.rule_name, 1)

    final, _, rule = run(tmp_path, [[1, 2]], lambda t: RaisesMet(t))
    assert final.status is Status.ISSUES_FOUND and "at step 1 " in final.status_details
    assert rule.report["RuleTriggered"] == 1 and rule.report["Datapoints"] == 3

    # data the end judgement reads that was never saved: not evaluated, as at a step
    class ReadsMissing(AtEnd):
        def invoke_at_end(self):  # type: ignore[no-untyped-def]
            return self.base_trial.tensor("never_saved").value(0)

    final, _, rule = run(tmp_path / "m", [[1, 2]], lambda t: ReadsMissing(t))
    assert final.status is Status.NO_ISSUES_FOUND and rule.report["Datapoints"] == 2


def test_unreadable_collections_end_with_an_error_status_not_a_traceback(tmp_path: Path) -> None:
    trial = create_trial(str(tmp_path))  # a live trial: the collections file is written later
    bad = tmp_path / "collections" / "000000000" / "worker_0_collections.json"
    bad.parent.mkdir(parents=True)
    bad.write_text("{not json")
    statuses: list[RuleStatus] = []
    final = evaluate(trial, Recording(trial), collections_timeout=5.0, sleep=lambda s: None, on_status=statuses.append)
    assert final.status is Status.ERROR and statuses[-1] == final
    assert final.status_details.startswith("ClientError: Cannot read the trial's collections: CorruptRecordError: ")
    assert "worker_0_collections.json" in final.status_details


class SlowSteps(Recording):
    """A rule whose every step takes 0.3 s of the (fake) clock."""

    def __init__(self, base_trial, clock: Clock):  # type: ignore[no-untyped-def]
        super().__init__(base_trial)
        self.clock = clock

    def invoke_at_step(self, step: int) -> bool:
        self.clock.now += 0.3
        return super().invoke_at_step(step)


def test_a_slow_poll_shortens_the_next_sleep_so_polls_keep_their_interval(tmp_path: Path) -> None:
    clock = Clock()
    grow = grower(tmp_path, [[1.0], [1.0, 1.0], [1.0, 1.0, 1.0, 1.0]], clock)
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(round(seconds, 6))
        grow(seconds)

    final, _, rule = run(tmp_path, [], lambda t: SlowSteps(t, clock), sleep=sleep, clock=clock)
    assert final.status is Status.NO_ISSUES_FOUND and rule.seen == list(range(7))
    # polls reading 0, 1, 2 and 4 steps took 0, 0.3, 0.6 and 1.2 s: the sleeps make up the rest of 1 s
    assert slept[:4] == [1.0, 0.7, 0.4, 0.0]
