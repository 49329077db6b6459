"""TensorVariance on written trials and on the smdebug fixtures."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sdlocal.evaluator.api import evaluate_trial
from sdlocal.evaluator.errors import RuleParameterError
from sdlocal.evaluator.loop import evaluate
from sdlocal.evaluator.rule import Verdict
from sdlocal.evaluator.rules import TensorVariance
from sdlocal.evaluator.status import Status
from tests.evaluator._trials import judged_nothing, make_trial, train_steps

W = "Net_fc1.weight"
B = "Net_fc1.bias"
G = "gradient/Net_fc1.weight"
WIDE = np.array([-10.0, 10.0], np.float32)  # variance 100
NARROW = np.array([0.5, 0.5001], np.float32)  # variance 2.5e-9


def test_fires_above_max_threshold(tmp_path: Path) -> None:
    trial = make_trial(tmp_path, train_steps([{W: NARROW}, {W: np.array([0.0, 2.0])}, {W: WIDE}]))
    rule = TensorVariance(trial, collection_names="weights", max_threshold="10")
    assert [rule.judge_step(s) for s in range(3)] == [Verdict.CONDITION_NOT_MET, Verdict.CONDITION_NOT_MET, Verdict.CONDITION_MET]
    status = evaluate(trial, TensorVariance(trial, collection_names="weights", max_threshold="10"), sleep=lambda s: None)
    assert status.status is Status.ISSUES_FOUND and "at step 2 resulted" in status.status_details


def test_fires_below_min_threshold(tmp_path: Path) -> None:
    trial = make_trial(tmp_path, train_steps([{W: WIDE[None]}, {W: NARROW[None]}]))  # a (1, 2) weight matrix
    rule = TensorVariance(trial, tensor_regex=r"fc1\.weight", min_threshold="1e-6")
    assert [rule.judge_step(s) for s in range(2)] == [Verdict.CONDITION_NOT_MET, Verdict.CONDITION_MET]


def test_silent_within_bounds(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    trial = make_trial(tmp_path, train_steps([{W: rng.normal(0, 1, 100).astype(np.float32)} for _ in range(5)]))
    rule = TensorVariance(trial, collection_names="weights", max_threshold="2", min_threshold="0.5")
    assert all(rule.judge_step(s) is Verdict.CONDITION_NOT_MET for s in range(5))


def test_collection_and_regex_are_a_union(tmp_path: Path) -> None:
    trial = make_trial(tmp_path, train_steps([{W: NARROW, B: WIDE, G: NARROW}]))
    assert TensorVariance(trial, collection_names="weights", max_threshold="1").judge_step(0) is Verdict.CONDITION_NOT_MET
    assert TensorVariance(trial, collection_names=["weights"], tensor_regex=r"bias$", max_threshold="1").judge_step(0) is Verdict.CONDITION_MET
    assert TensorVariance(trial, collection_names="weights,biases", max_threshold="1").judge_step(0) is Verdict.CONDITION_MET


def test_without_thresholds_nothing_is_evaluated(tmp_path: Path) -> None:
    trial = make_trial(tmp_path, train_steps([{W: WIDE}, {W: NARROW}]))
    rule = TensorVariance(trial)  # SageMaker's rule_configs.tensor_variance(): no parameters
    assert [rule.judge_step(s) for s in range(2)] == [Verdict.NOT_EVALUATED] * 2
    assert evaluate(trial, TensorVariance(trial), sleep=lambda s: None).status is Status.NO_ISSUES_FOUND


def test_edge_cases_nan_empty_no_match_missing_steps_mixed_modes(tmp_path: Path) -> None:
    steps = [
        (0, "TRAIN", 0, {W: np.array([np.nan, 1.0])}),  # NaN variance: skipped
        (1, "TRAIN", 1, {W: np.zeros(0, np.float32)}),  # empty: skipped
        (2, "TRAIN", 2, {G: WIDE}),  # no weight at this step
        (3, "EVAL", 0, {W: WIDE}),  # EVAL steps are inspected too
    ]
    trial = make_trial(tmp_path, steps)
    rule = TensorVariance(trial, collection_names="weights", max_threshold="10")
    assert [rule.judge_step(s) for s in range(4)] == [Verdict.NOT_EVALUATED] * 3 + [Verdict.CONDITION_MET]
    # a collection the trial lacks, a regex matching nothing: the rule judged nothing, and says so
    rule = TensorVariance(trial, collection_names="relu_output", tensor_regex="nomatch", max_threshold="10")
    assert judged_nothing(evaluate(trial, rule, sleep=lambda s: None))  # no verdict without data


def test_one_step_only(tmp_path: Path) -> None:
    trial = make_trial(tmp_path, train_steps([{W: NARROW}]))
    status = evaluate(trial, TensorVariance(trial, tensor_regex="weight", max_threshold="1"), sleep=lambda s: None)
    assert status.status is Status.NO_ISSUES_FOUND and status.last_evaluated_step == 0


def test_saved_variance_reduction_is_used(tmp_path: Path) -> None:
    trial = make_trial(tmp_path, train_steps([{"smdebug/reductions/variance/w": np.float32(50.0)}]))
    assert TensorVariance(trial, tensor_regex="^w$", max_threshold="10").judge_step(0) is Verdict.CONDITION_MET
    assert TensorVariance(trial, tensor_regex="^w$", max_threshold="100").judge_step(0) is Verdict.CONDITION_NOT_MET


def test_parameters(tmp_path: Path) -> None:
    trial = make_trial(tmp_path, train_steps([{W: WIDE}]))
    rule = TensorVariance(trial, collection_names="weights", max_threshold="1e3", min_threshold="None")
    assert rule.max_threshold == 1000.0 and rule.min_threshold is None
    with pytest.raises(RuleParameterError, match="'max_threshold'"):
        TensorVariance(trial, collection_names="weights", max_threshold="big")
    with pytest.raises(RuleParameterError, match="'min_threshold'"):
        TensorVariance(trial, collection_names="weights", max_threshold="1", min_threshold="2")
    with pytest.raises(RuleParameterError, match="'collection_names'"):
        TensorVariance(trial, max_threshold="1")
    with pytest.raises(RuleParameterError, match="'tensor_regex'"):
        TensorVariance(trial, tensor_regex="(", max_threshold="1")
    status = evaluate_trial(str(tmp_path), "TensorVariance", {"tensor_regex": "weight", "max_threshold": "x"})
    assert status.status is Status.ERROR and "'max_threshold'" in status.status_details
    status = evaluate_trial(str(tmp_path), "TensorVariance", {"tensor_regex": "weight", "max_threshold": "10"})
    assert status.status is Status.ISSUES_FOUND


# healthy std-0.x weights: variance ~1e-3..1e-1; the exploding run's weights are NaN after step 1
FIXTURE_CASES = [
    ("healthy", {}, None),
    ("healthy_eval", {}, None),
    ("healthy_relu", {}, None),
    ("healthy", {"collection_names": "weights", "max_threshold": "1", "min_threshold": "1e-6"}, None),
    ("healthy_eval", {"collection_names": "weights,gradients", "max_threshold": "1"}, None),
    ("healthy_relu", {"collection_names": "weights", "max_threshold": "1", "min_threshold": "1e-6"}, None),
    ("exploding", {"collection_names": "weights", "max_threshold": "1"}, 0),  # weights initialised with std 50
    ("zero_weights", {"collection_names": "weights", "min_threshold": "1e-12"}, 0),  # all-zero hidden weights
    ("vanishing", {"collection_names": "gradients", "min_threshold": "1e-20"}, 0),  # gradients ~1e-36
]


@pytest.mark.parametrize(("trial_name", "params", "fires_at"), FIXTURE_CASES)
def test_fixture_trials(fixture_trials: Path, trial_name: str, params: dict[str, str], fires_at: int | None) -> None:
    status = evaluate_trial(str(fixture_trials / trial_name), "TensorVariance", params)
    if fires_at is None:
        assert status.status is Status.NO_ISSUES_FOUND, status.status_details
    else:
        assert status.status is Status.ISSUES_FOUND
        assert f"at step {fires_at} resulted" in status.status_details


def test_min_threshold_leaves_vectors_alone_norm_weights_at_init(tmp_path: Path) -> None:
    """A BatchNorm/LayerNorm scale starts at 1.0 and a bias at 0.0 (zero variance at step 0 of
    every healthy run): vectors are not judged against min_threshold; a constant weight MATRIX
    (symmetry never broken) still is, and max_threshold still judges vectors."""
    norm_w, norm_b = "Net_bn1.weight", "Net_bn1.bias"
    steps = train_steps([{norm_w: np.ones(16, np.float32), norm_b: np.zeros(16, np.float32), W: np.full((4, 4), 0.1, np.float32)},
                         {norm_w: np.ones(16, np.float32), norm_b: np.zeros(16, np.float32), W: np.eye(4, dtype=np.float32)}])
    trial = make_trial(tmp_path, steps)
    assert TensorVariance(trial, tensor_regex=r"bn1", min_threshold="1e-8").judge_step(0) is Verdict.CONDITION_NOT_MET
    assert TensorVariance(trial, collection_names="weights", min_threshold="1e-8").judge_step(0) is Verdict.CONDITION_MET  # fc1
    assert TensorVariance(trial, collection_names="weights", min_threshold="1e-8").judge_step(1) is Verdict.CONDITION_NOT_MET
    wide = make_trial(tmp_path / "wide", train_steps([{norm_w: WIDE}]))
    assert TensorVariance(wide, tensor_regex="bn1", max_threshold="10").judge_step(0) is Verdict.CONDITION_MET
