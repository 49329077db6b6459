"""StalledTrainingRule: time without new steps, judged through the loop's idle callback."""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from sdlocal.evaluator.api import evaluate_trial
from sdlocal.evaluator.errors import RuleParameterError
from sdlocal.evaluator.loop import evaluate
from sdlocal.evaluator.rule import Verdict
from sdlocal.evaluator.rules import StalledTrainingRule
from sdlocal.evaluator.status import RuleStatus, Status
from sdlocal.trial import TrialWriter, create_trial
from tests.evaluator._trials import COLLECTIONS, Clock

LOSS = "CrossEntropyLoss_output_0"


def _writer(root: Path) -> TrialWriter:
    writer = TrialWriter(root)
    writer.write_collections(COLLECTIONS)
    return writer


def _follow(root: Path, rule_params: dict[str, object], write_at: dict[float, int], end_at: float,
            *, end_on_fire: bool = False) -> tuple[RuleStatus, list[RuleStatus], StalledTrainingRule]:
    """Follow a live trial with a fake clock: `write_at` maps clock times to the step written then."""
    writer = _writer(root)
    clock = Clock()
    statuses: list[RuleStatus] = []

    def sleep(seconds: float) -> None:
        clock.now += seconds
        step = write_at.get(clock.now)
        if step is not None:
            writer.write_step(step, "TRAIN", step, [(LOSS, np.float32(1.0))])
        if clock.now >= end_at:
            writer.write_end_marker()

    def on_status(status: RuleStatus) -> None:
        statuses.append(status)
        if end_on_fire and status.status is Status.ISSUES_FOUND:
            writer.write_end_marker()  # what a StopTraining action leads to

    trial = create_trial(str(root))
    rule = StalledTrainingRule(trial, **rule_params)  # type: ignore[arg-type]
    final = evaluate(trial, rule, interval=1.0, clock=clock, sleep=sleep, on_status=on_status)
    return final, statuses, rule


def test_fires_after_threshold_without_new_steps(tmp_path: Path) -> None:
    # steps at t=1,2,3, then silence: at t=13 the last step (seen at t=3) is 10 s old
    final, statuses, _ = _follow(tmp_path, {"threshold": "10"}, {1.0: 0, 2.0: 1, 3.0: 2}, end_at=100, end_on_fire=True)
    fired = next(s for s in statuses if s.status is Status.ISSUES_FOUND)
    assert fired.status_details == (
        "RuleEvaluationConditionMet: Evaluation of the rule StalledTrainingRule at step 2 resulted in the condition being met"
    )
    assert final.status is Status.ISSUES_FOUND and final.last_evaluated_step == 2


def test_silent_when_steps_keep_coming(tmp_path: Path) -> None:
    # a step every 9 s (gaps below the 10 s threshold), then the training ends
    write_at = {float(t): i for i, t in enumerate(range(9, 90, 9))}
    final, statuses, rule = _follow(tmp_path, {"threshold": "10"}, write_at, end_at=90)
    assert final.status is Status.NO_ISSUES_FOUND
    assert all(s.status is not Status.ISSUES_FOUND for s in statuses)
    assert rule.report["Datapoints"] == len(write_at)


def test_no_step_at_all_counts_from_the_start(tmp_path: Path) -> None:
    final, statuses, _ = _follow(tmp_path, {"threshold": "5"}, {}, end_at=100, end_on_fire=True)
    assert final.status is Status.ISSUES_FOUND
    assert "at step 0 resulted" in final.status_details and final.last_evaluated_step is None


def test_default_threshold_is_30_minutes(tmp_path: Path) -> None:
    rule = StalledTrainingRule(create_trial(str(tmp_path)))
    assert rule.threshold == 1800.0 and rule.action_str == ""
    assert rule.invoke_idle(1799.0) is Verdict.NOT_EVALUATED
    assert rule.invoke_idle(1800.0) is Verdict.CONDITION_MET
    assert rule.report["RuleTriggered"] == 1


def test_stop_training_on_fire_sets_the_action(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trial = create_trial(str(tmp_path))
    monkeypatch.setenv("SDLOCAL_JOB_NAME", "my-job-2024")
    for flag in ("True", "true", True):
        rule = StalledTrainingRule(trial, stop_training_on_fire=flag)
        assert json.loads(rule.action_str) == [{"name": "StopTraining", "training_job_prefix": "my-job-2024"}]
    rule = StalledTrainingRule(trial, stop_training_on_fire="True", training_job_name_prefix="my-job")
    assert json.loads(rule.action_str) == [{"name": "StopTraining", "training_job_prefix": "my-job"}]
    assert StalledTrainingRule(trial, stop_training_on_fire="false").action_str == ""
    # an action_json of the request is kept when the rule itself does not stop the training
    assert StalledTrainingRule(trial, action_str='[{"name": "email"}]').action_str == '[{"name": "email"}]'


def test_parameters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trial = create_trial(str(tmp_path))
    assert StalledTrainingRule(trial, threshold="2.5").threshold == 2.5
    with pytest.raises(RuleParameterError, match="'threshold'"):
        StalledTrainingRule(trial, threshold="ten")
    with pytest.raises(RuleParameterError, match="'threshold'"):
        StalledTrainingRule(trial, threshold="-1")
    with pytest.raises(RuleParameterError, match="'stop_training_on_fire'"):
        StalledTrainingRule(trial, stop_training_on_fire="maybe")
    monkeypatch.delenv("SDLOCAL_JOB_NAME", raising=False)
    with pytest.raises(RuleParameterError, match="'training_job_name_prefix'"):
        StalledTrainingRule(trial, stop_training_on_fire="True")


def test_bad_parameter_through_the_api_is_an_error_status(tmp_path: Path) -> None:
    writer = _writer(tmp_path)
    writer.write_step(0, "TRAIN", 0, [(LOSS, np.float32(1.0))])
    status = evaluate_trial(str(tmp_path), "StalledTrainingRule", {"threshold": "soon"})
    assert status.status is Status.ERROR and "'threshold'" in status.status_details


@pytest.mark.parametrize("trial_name", ["healthy", "healthy_eval", "healthy_relu", "flat_loss"])
def test_finished_fixture_trials_cannot_stall(fixture_trials: Path, trial_name: str) -> None:
    status = evaluate_trial(str(fixture_trials / trial_name), "StalledTrainingRule", {"threshold": "0"})
    assert status.status is Status.NO_ISSUES_FOUND, status.status_details


def test_real_short_stall(tmp_path: Path) -> None:
    """Real clock and sleep: three steps are written, then nothing; a 2 s threshold fires, and the
    (simulated) stop of the training ends the evaluation."""
    writer = _writer(tmp_path)
    for step in range(3):
        writer.write_step(step, "TRAIN", step, [(LOSS, np.float32(1.0))])
    trial = create_trial(str(tmp_path))
    fired_after: list[float] = []
    started = time.monotonic()

    def on_status(status: RuleStatus) -> None:
        if status.status is Status.ISSUES_FOUND and not fired_after:
            fired_after.append(time.monotonic() - started)
            writer.write_end_marker()

    final = evaluate(trial, StalledTrainingRule(trial, threshold="2"), interval=0.1, deadline=30, on_status=on_status)
    assert final.status is Status.ISSUES_FOUND and final.last_evaluated_step == 2
    assert "StalledTrainingRule at step 2 resulted" in final.status_details
    assert fired_after and fired_after[0] >= 2.0


def test_a_stall_is_logged_and_counted_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # steps at t=1 and t=20, idle polls every second in between and after: two stalls of > 5 s
    with caplog.at_level("INFO", logger="sdlocal.evaluator.rules.StalledTrainingRule"):
        final, _, rule = _follow(tmp_path, {"threshold": "5"}, {1.0: 0, 20.0: 1}, end_at=40)
    assert final.status is Status.ISSUES_FOUND
    assert rule.report["RuleTriggered"] == 2  # one per stall, not one per idle poll
    assert len([r for r in caplog.records if "no new step" in r.getMessage()]) == 2
