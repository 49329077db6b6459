"""SaturatedActivation on written trials and on the smdebug fixtures."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sdlocal.evaluator.api import evaluate_trial
from sdlocal.evaluator.errors import RuleParameterError
from sdlocal.evaluator.rule import Verdict
from sdlocal.evaluator.rules import SaturatedActivation
from sdlocal.evaluator.status import Status
from sdlocal.trial import Collection, TrialWriter, create_trial
from tests.evaluator._trials import COLLECTIONS, judged_nothing, make_trial, write_steps

TANH = "layer0_tanh_input_0"
SIGMOID = "layer1_sigmoid_input_0"
RNG = np.random.default_rng(1)


def layer(saturated_nodes: int, value: float, nodes: int = 10, samples: int = 64) -> np.ndarray:
    """(samples, nodes) inputs: the first `saturated_nodes` are `value` for every sample, the
    others standard normal (inside every band)."""
    out = RNG.standard_normal((samples, nodes)).astype(np.float32)
    out[:, :saturated_nodes] = value
    return out


def test_tanh_fires_beyond_its_band(tmp_path: Path) -> None:
    trial = make_trial(tmp_path, [(0, "TRAIN", 0, {TANH: layer(6, 12.0)}), (1, "TRAIN", 1, {TANH: layer(6, -9.0)}),
                                  (2, "TRAIN", 2, {TANH: layer(6, -12.0)})])
    rule = SaturatedActivation(trial)
    assert [rule.judge_step(s) for s in range(3)] == [Verdict.CONDITION_MET, Verdict.CONDITION_NOT_MET, Verdict.CONDITION_MET]


def test_sigmoid_band_is_not_the_tanh_band(tmp_path: Path) -> None:
    # 12 is saturated for tanh but inside the sigmoid band [-23, 17]
    trial = make_trial(tmp_path, [(0, "TRAIN", 0, {SIGMOID: layer(8, 12.0)}), (1, "TRAIN", 1, {SIGMOID: layer(8, 20.0)}),
                                  (2, "TRAIN", 2, {SIGMOID: layer(8, -30.0)})])
    rule = SaturatedActivation(trial)
    assert [rule.judge_step(s) for s in range(3)] == [Verdict.CONDITION_NOT_MET, Verdict.CONDITION_MET, Verdict.CONDITION_MET]
    narrow = SaturatedActivation(trial, threshold_sigmoid_min="-5", threshold_sigmoid_max="5")
    assert narrow.judge_step(0) is Verdict.CONDITION_MET


def test_threshold_layer_and_inactivity_from_strings(tmp_path: Path) -> None:
    value = layer(5, 12.0)  # exactly half the nodes saturated: not more than 50 %
    value[:2, 5:] = 12.0
    trial = make_trial(tmp_path, [(0, "TRAIN", 0, {TANH: value})])
    assert SaturatedActivation(trial).judge_step(0) is Verdict.CONDITION_NOT_MET
    assert SaturatedActivation(trial, threshold_layer="49.5").judge_step(0) is Verdict.CONDITION_MET
    # the other nodes are inside the band in 62 of 64 samples (97 %): saturated only at 98 %
    assert SaturatedActivation(trial, threshold_layer="60", threshold_inactivity="98").judge_step(0) is Verdict.CONDITION_MET


def test_activation_told_by_collection_whatever_the_name(tmp_path: Path) -> None:
    name = "Net_act_input_0"
    writer = TrialWriter(tmp_path)
    writer.write_collections((*COLLECTIONS, Collection("sigmoid_input", tensor_names=frozenset({name}))))
    writer.write_step(0, "TRAIN", 0, [(name, layer(8, 12.0))])
    writer.write_end_marker()
    trial = create_trial(str(tmp_path))
    assert SaturatedActivation(trial).judge_step(0) is Verdict.CONDITION_NOT_MET  # sigmoid band: 12 is fine
    assert SaturatedActivation(trial, threshold_sigmoid_max="10").judge_step(0) is Verdict.CONDITION_MET


def test_tensor_neither_tanh_nor_sigmoid_is_not_judged(tmp_path: Path) -> None:
    trial = make_trial(tmp_path, [(0, "TRAIN", 0, {"Net_act_input_0": layer(10, 50.0)})])
    assert SaturatedActivation(trial, tensor_regex="act_input").judge_step(0) is Verdict.NOT_EVALUATED


def test_no_tensors_nan_one_step_mixed_modes_missing_steps(tmp_path: Path) -> None:
    nan_layer = layer(0, 0.0)
    nan_layer[:, :8] = np.nan  # 8 NaN-only nodes left out; 2 healthy nodes remain
    steps = [
        (0, "TRAIN", 0, {"CrossEntropyLoss_output_0": np.float32(1.0)}),
        (1, "TRAIN", 1, {TANH: nan_layer}),
        (2, "EVAL", 0, {TANH: layer(9, 30.0)}),
        (3, "TRAIN", 2, {TANH: np.full((4, 3), np.nan, np.float32)}),
    ]
    trial = make_trial(tmp_path, steps)
    rule = SaturatedActivation(trial)
    assert [rule.judge_step(s) for s in range(4)] == [
        Verdict.NOT_EVALUATED, Verdict.CONDITION_NOT_MET, Verdict.CONDITION_MET, Verdict.NOT_EVALUATED]
    root = write_steps(tmp_path / "none", [(0, "TRAIN", 0, {"Net_fc0.weight": np.ones((2, 2), np.float32)})])
    assert judged_nothing(evaluate_trial(str(root), "SaturatedActivation", {}))  # no verdict without data


@pytest.mark.parametrize(("param", "value"), [("threshold_tanh_min", "low"), ("threshold_layer", "101"),
                                              ("threshold_sigmoid_min", "20"), ("threshold_inactivity", "-1")])
def test_bad_parameters_name_the_parameter(tmp_path: Path, param: str, value: str) -> None:
    trial = make_trial(tmp_path, [(0, "TRAIN", 0, {TANH: layer(0, 0.0)})])
    with pytest.raises(RuleParameterError, match=param):
        SaturatedActivation(trial, **{param: value})
    status = evaluate_trial(str(tmp_path), "SaturatedActivation", {param: value})
    assert status.status is Status.ERROR and param in status.status_details


@pytest.mark.parametrize("trial_name", ["healthy", "healthy_eval", "healthy_relu", "vanishing"])
def test_fixture_trials_without_tanh_or_sigmoid_inputs_judged_nothing(fixture_trials: Path, trial_name: str) -> None:
    # the fixtures save no activation inputs: the rule judged nothing, and says so
    status = evaluate_trial(str(fixture_trials / trial_name), "SaturatedActivation", {})
    assert judged_nothing(status), status.status_details  # no verdict without data
