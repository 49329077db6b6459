"""WeightUpdateRatio on written trials and on the smdebug fixtures."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sdlocal.evaluator.api import evaluate_trial
from sdlocal.evaluator.errors import RuleParameterError
from sdlocal.evaluator.rule import Verdict
from sdlocal.evaluator.rules import WeightUpdateRatio
from sdlocal.evaluator.status import Status
from tests.evaluator._trials import make_trial, train_steps

W = "Net_fc0.weight"
W0 = np.ones((4, 4), np.float32)  # norm 4


def weights_with_updates(*updates: float) -> list[np.ndarray]:
    """W0, then W0 + u (every element) for each update u, cumulatively."""
    out = [W0]
    for u in updates:
        out.append(out[-1] + np.float32(u))
    return out


def verdicts(rule: WeightUpdateRatio, steps: range | list[int]) -> list[Verdict]:
    return [rule.judge_step(s) for s in steps]


def test_healthy_updates_are_silent_large_and_zero_updates_fire(tmp_path: Path) -> None:
    ws = weights_with_updates(1e-3, 100.0, 0.0)  # ratios 1e-3, ~25, 0
    trial = make_trial(tmp_path, train_steps({W: w} for w in ws))
    assert verdicts(WeightUpdateRatio(trial), range(4)) == [
        Verdict.NOT_EVALUATED,  # nothing earlier to compare with
        Verdict.CONDITION_NOT_MET,
        Verdict.CONDITION_MET,
        Verdict.CONDITION_MET,
    ]


def test_thresholds_from_strings(tmp_path: Path) -> None:
    trial = make_trial(tmp_path, train_steps({W: w} for w in weights_with_updates(1e-3)))  # ratio 1e-3
    assert WeightUpdateRatio(trial, small_threshold="0.01").judge_step(1) is Verdict.CONDITION_MET
    assert WeightUpdateRatio(trial, large_threshold="1e-4").judge_step(1) is Verdict.CONDITION_MET
    assert WeightUpdateRatio(trial, large_threshold="1", small_threshold="1e-5").judge_step(1) is Verdict.CONDITION_NOT_MET


def test_zero_weights_unchanged_fire_thanks_to_epsilon(tmp_path: Path) -> None:
    zero = np.zeros((3, 3), np.float32)
    trial = make_trial(tmp_path, train_steps([{W: zero}, {W: zero}]))
    assert WeightUpdateRatio(trial).judge_step(1) is Verdict.CONDITION_MET


def test_num_steps_compares_with_the_latest_saved_step_that_far_back(tmp_path: Path) -> None:
    # saved at steps 0, 2, 4, 6: steps 2→4 change by 1e-3 but 0→2 and 4→6 not at all
    ws = [W0, W0, W0 + np.float32(1e-3), W0 + np.float32(1e-3)]
    trial = make_trial(tmp_path, [(2 * i, "TRAIN", 2 * i, {W: w}) for i, w in enumerate(ws)])
    assert verdicts(WeightUpdateRatio(trial), [2, 4, 6]) == [Verdict.CONDITION_MET, Verdict.CONDITION_NOT_MET,
                                                             Verdict.CONDITION_MET]
    # num_steps=3: step 4 compares with step 0, step 6 with step 2 (both changed), step 2 has none
    assert verdicts(WeightUpdateRatio(trial, num_steps="3"), [2, 4, 6]) == [
        Verdict.NOT_EVALUATED, Verdict.CONDITION_NOT_MET, Verdict.CONDITION_NOT_MET]


def test_train_steps_only_when_the_trial_has_them(tmp_path: Path) -> None:
    w1 = W0 + np.float32(1e-3)
    steps = [(0, "TRAIN", 0, {W: W0}), (1, "EVAL", 0, {W: W0}), (2, "TRAIN", 1, {W: w1}), (3, "EVAL", 1, {W: w1})]
    trial = make_trial(tmp_path, steps)
    # EVAL steps (whose weights equal the preceding TRAIN step's) are not evaluated; step 2
    # compares with TRAIN step 0, not with EVAL step 1
    assert verdicts(WeightUpdateRatio(trial), range(4)) == [
        Verdict.NOT_EVALUATED, Verdict.NOT_EVALUATED, Verdict.CONDITION_NOT_MET, Verdict.NOT_EVALUATED]
    eval_only = make_trial(tmp_path / "eval", [(0, "EVAL", 0, {W: W0}), (1, "EVAL", 1, {W: W0})])
    assert WeightUpdateRatio(eval_only).judge_step(1) is Verdict.CONDITION_MET  # no TRAIN: global steps


def test_nan_missing_steps_shape_change_one_step_and_no_weights(tmp_path: Path) -> None:
    nan = np.full((4, 4), np.nan, np.float32)
    steps = train_steps([{W: W0}, {"CrossEntropyLoss_output_0": np.float32(1)}, {W: nan},
                         {W: np.ones((2, 2), np.float32)}, {W: np.ones((2, 2), np.float32) * 1.001}])
    trial = make_trial(tmp_path, steps)
    assert verdicts(WeightUpdateRatio(trial), range(5)) == [
        Verdict.NOT_EVALUATED,  # first value
        Verdict.NOT_EVALUATED,  # no weights saved at this step
        Verdict.NOT_EVALUATED,  # NaN ratio: ExplodingTensor's finding
        Verdict.NOT_EVALUATED,  # shape changed from the previous saved value
        Verdict.CONDITION_NOT_MET,
    ]
    single = make_trial(tmp_path / "one", train_steps([{W: W0}]))
    assert evaluate_trial(str(tmp_path / "one"), "WeightUpdateRatio", {}).status is Status.NO_ISSUES_FOUND
    assert WeightUpdateRatio(single).judge_step(0) is Verdict.NOT_EVALUATED
    no_weights = make_trial(tmp_path / "nw", train_steps([{"x": W0}, {"x": W0}]))
    assert WeightUpdateRatio(no_weights).judge_step(1) is Verdict.NOT_EVALUATED


@pytest.mark.parametrize(("param", "value"), [("num_steps", "1.5"), ("num_steps", "0"), ("large_threshold", "big"),
                                              ("small_threshold", "-1"), ("epsilon", "True")])
def test_bad_parameters_name_the_parameter(tmp_path: Path, param: str, value: str) -> None:
    trial = make_trial(tmp_path, train_steps([{W: W0}]))
    with pytest.raises(RuleParameterError, match=param):
        WeightUpdateRatio(trial, **{param: value})
    status = evaluate_trial(str(tmp_path), "WeightUpdateRatio", {param: value})
    assert status.status is Status.ERROR and param in status.status_details


def test_num_steps_none_string_means_previous_saved_step(tmp_path: Path) -> None:
    trial = make_trial(tmp_path, train_steps({W: w} for w in weights_with_updates(0.0)))
    assert WeightUpdateRatio(trial, num_steps="None").judge_step(1) is Verdict.CONDITION_MET


# healthy runs silent; every faulty fixture physically stalls (lr 0, dead or vanishing gradients)
# or blows up (lr 1e6) its weights from the first update on
@pytest.mark.parametrize(("trial_name", "fires"), [
    ("healthy", False), ("healthy_eval", False), ("healthy_relu", False), ("exploding", True),
    ("vanishing", True), ("dead_relu", True), ("flat_loss", True), ("zero_weights", True)])
def test_fixture_trials(fixture_trials: Path, trial_name: str, fires: bool) -> None:
    status = evaluate_trial(str(fixture_trials / trial_name), "WeightUpdateRatio", {})
    if fires:
        assert status.status is Status.ISSUES_FOUND
        assert "rule WeightUpdateRatio at step 1 resulted" in status.status_details
    else:
        assert status.status is Status.NO_ISSUES_FOUND, status.status_details
