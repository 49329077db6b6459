"""SimilarAcrossRuns: base trial against other trials, written here and written by smdebug."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sdlocal.evaluator.api import evaluate_trial
from sdlocal.evaluator.errors import RuleParameterError
from sdlocal.evaluator.loop import evaluate
from sdlocal.evaluator.registry import instantiate_rule
from sdlocal.evaluator.rule import Verdict
from sdlocal.evaluator.rules import SimilarAcrossRuns
from sdlocal.evaluator.status import Status
from sdlocal.trial import TrialWriter, create_trial
from tests.evaluator._trials import judged_nothing, make_trial, train_steps, write_steps

W = "Net_fc1.weight"
G = "gradient/Net_fc1.weight"
LOSS = "CrossEntropyLoss_output_0"


def _run(i: int, w: float = 1.0) -> dict[str, object]:
    return {W: np.full(3, w, np.float32), LOSS: np.float32(1.0 / (i + 1))}


def test_identical_runs_are_silent(tmp_path: Path) -> None:
    spec = train_steps([_run(i) for i in range(4)])
    base, other = make_trial(tmp_path / "a", spec), make_trial(tmp_path / "b", spec)
    rule = SimilarAcrossRuns(base, other_trials=[other])
    assert [rule.judge_step(s) for s in range(4)] == [Verdict.CONDITION_NOT_MET] * 4
    assert evaluate(base, SimilarAcrossRuns(base, other_trials=[other]), sleep=lambda s: None).status is Status.NO_ISSUES_FOUND


def test_fires_where_a_tensor_differs(tmp_path: Path) -> None:
    base = make_trial(tmp_path / "a", train_steps([_run(i) for i in range(4)]))
    other = make_trial(tmp_path / "b", train_steps([_run(i, w=1.0 if i < 2 else 1.1) for i in range(4)]))
    rule = SimilarAcrossRuns(base, other_trials=[other])
    assert [rule.judge_step(s) for s in range(4)] == [Verdict.CONDITION_NOT_MET] * 2 + [Verdict.CONDITION_MET] * 2
    status = evaluate(base, SimilarAcrossRuns(base, other_trials=[other]), sleep=lambda s: None)
    assert status.status is Status.ISSUES_FOUND and "at step 2 resulted" in status.status_details
    # the selection limits what is compared: the losses agree
    rule = SimilarAcrossRuns(base, collection_names="losses", other_trials=[other])
    assert not any(rule.judge_step(s).fired for s in range(4))


def test_tolerance_nan_and_shape(tmp_path: Path) -> None:
    base = make_trial(tmp_path / "a", train_steps([{W: np.array([1.0, np.nan])}, {W: np.ones(2)}, {W: np.ones(2)}]))
    other = make_trial(tmp_path / "b", train_steps([{W: np.array([1.0, np.nan])}, {W: np.ones(2) + 1e-9}, {W: np.ones(3)}]))
    rule = SimilarAcrossRuns(base, other_trials=[other])
    # NaN at the same place is the same value; float noise is not a difference; shapes are
    assert [rule.judge_step(s) for s in range(3)] == [Verdict.CONDITION_NOT_MET, Verdict.CONDITION_NOT_MET, Verdict.CONDITION_MET]
    other_nan = make_trial(tmp_path / "c", train_steps([{W: np.array([1.0, 2.0])}]))
    assert SimilarAcrossRuns(base, other_trials=[other_nan]).judge_step(0) is Verdict.CONDITION_MET


def test_steps_are_matched_by_mode_and_mode_step(tmp_path: Path) -> None:
    # the other run evaluates one step later: EVAL mode step 0 is global 1 in base, 2 in other
    base = make_trial(tmp_path / "a", [(0, "TRAIN", 0, {W: np.ones(2)}), (1, "EVAL", 0, {LOSS: np.float32(0.5)}),
                                       (2, "TRAIN", 1, {W: np.ones(2)})])
    other = make_trial(tmp_path / "b", [(0, "TRAIN", 0, {W: np.ones(2)}), (1, "TRAIN", 1, {W: np.ones(2)}),
                                        (2, "EVAL", 0, {LOSS: np.float32(0.5)})])
    rule = SimilarAcrossRuns(base, other_trials=[other])
    assert [rule.judge_step(s) for s in range(3)] == [Verdict.CONDITION_NOT_MET] * 3
    other2 = make_trial(tmp_path / "c", [(0, "TRAIN", 0, {W: np.ones(2)}), (1, "EVAL", 0, {LOSS: np.float32(0.7)})])
    rule = SimilarAcrossRuns(base, other_trials=[other2])
    assert [rule.judge_step(s) for s in range(3)] == [Verdict.CONDITION_NOT_MET, Verdict.CONDITION_MET, Verdict.NOT_EVALUATED]


def test_missing_in_other_or_no_match_is_not_evaluated(tmp_path: Path) -> None:
    base = make_trial(tmp_path / "a", train_steps([{W: np.ones(2), G: np.ones(2)}, {W: np.ones(2)}]))
    other = make_trial(tmp_path / "b", train_steps([{G: np.ones(2)}]))
    rule = SimilarAcrossRuns(base, other_trials=[other])
    assert [rule.judge_step(s) for s in range(2)] == [Verdict.CONDITION_NOT_MET, Verdict.NOT_EVALUATED]
    rule = SimilarAcrossRuns(base, tensor_regex="nomatch", collection_names="relu_output", other_trials=[other])
    assert judged_nothing(evaluate(base, rule, sleep=lambda s: None))  # no verdict without data


def test_live_other_trial_is_refreshed(tmp_path: Path) -> None:
    base = make_trial(tmp_path / "a", train_steps([{W: np.ones(2)}, {W: np.ones(2)}]))
    write_steps(tmp_path / "b", train_steps([{W: np.ones(2)}]), end=False)
    other = create_trial(str(tmp_path / "b"))
    rule = SimilarAcrossRuns(base, other_trials=[other])
    assert rule.judge_step(0) is Verdict.CONDITION_NOT_MET
    TrialWriter(tmp_path / "b").write_step(1, "TRAIN", 1, [(W, np.zeros(2))])
    assert rule.judge_step(1) is Verdict.CONDITION_MET


def test_several_other_trials_fire_if_any_differs(tmp_path: Path) -> None:
    spec = train_steps([_run(0)])
    base, same = make_trial(tmp_path / "a", spec), make_trial(tmp_path / "b", spec)
    different = make_trial(tmp_path / "c", train_steps([_run(0, w=2.0)]))
    assert SimilarAcrossRuns(base, other_trials=[same, different]).judge_step(0) is Verdict.CONDITION_MET
    assert SimilarAcrossRuns(base, other_trials=[same, same]).judge_step(0) is Verdict.CONDITION_NOT_MET


def test_other_trials_are_required(tmp_path: Path) -> None:
    base = make_trial(tmp_path, train_steps([_run(0)]))
    for missing in (None, []):
        with pytest.raises(RuleParameterError, match="'other_trials'"):
            SimilarAcrossRuns(base, other_trials=missing)
    with pytest.raises(RuleParameterError, match="'tensor_regex'"):
        SimilarAcrossRuns(base, tensor_regex="[", other_trials=[base])
    # through the evaluator API: an Error status naming the parameter
    status = evaluate_trial(str(tmp_path), "SimilarAcrossRuns", {})
    assert status.status is Status.ERROR and "'other_trials'" in status.status_details
    # instantiated from string RuleParameters the way the evaluator does it
    rule = instantiate_rule(SimilarAcrossRuns, base, {"collection_names": "weights,losses"}, other_trials=[base])
    assert isinstance(rule, SimilarAcrossRuns) and rule.selection.collections == ("weights", "losses")


def test_other_trial_parameter_through_the_api(tmp_path: Path) -> None:
    base = write_steps(tmp_path / "a", train_steps([_run(i) for i in range(3)]))
    other = write_steps(tmp_path / "b", train_steps([_run(i, w=1.0 + i) for i in range(3)]))
    status = evaluate_trial(str(base), "SimilarAcrossRuns", {"other_trial_0": str(other)})
    assert status.status is Status.ISSUES_FOUND and "at step 1 resulted" in status.status_details
    status = evaluate_trial(str(base), "SimilarAcrossRuns", {"other_trials": str(base)})
    assert status.status is Status.NO_ISSUES_FOUND


@pytest.mark.parametrize("trial_name", ["healthy", "healthy_eval", "healthy_relu"])
def test_fixture_trial_against_itself_is_silent(fixture_trials: Path, trial_name: str) -> None:
    path = str(fixture_trials / trial_name)
    status = evaluate_trial(path, "SimilarAcrossRuns", {"other_trial_0": path})
    assert status.status is Status.NO_ISSUES_FOUND, status.status_details


def test_fixture_trials_from_different_runs_differ(fixture_trials: Path) -> None:
    # healthy and healthy_relu: same model shape, different random batches and initial weights
    status = evaluate_trial(str(fixture_trials / "healthy"), "SimilarAcrossRuns",
                            {"other_trial_0": str(fixture_trials / "healthy_relu"), "collection_names": "weights"})
    assert status.status is Status.ISSUES_FOUND and "at step 0 resulted" in status.status_details
    # flat_loss trains with lr 0 on one batch: its loss is the same at every step, but not healthy's
    status = evaluate_trial(str(fixture_trials / "flat_loss"), "SimilarAcrossRuns",
                            {"other_trial_0": str(fixture_trials / "healthy"), "collection_names": "losses"})
    assert status.status is Status.ISSUES_FOUND
