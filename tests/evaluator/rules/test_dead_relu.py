"""DeadRelu on written trials and on the smdebug fixtures."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sdlocal.evaluator.api import evaluate_trial
from sdlocal.evaluator.errors import RuleParameterError
from sdlocal.evaluator.rule import Verdict
from sdlocal.evaluator.rules import DeadRelu
from sdlocal.evaluator.status import Status
from sdlocal.trial import Collection, TrialWriter, create_trial
from tests.evaluator._trials import COLLECTIONS, judged_nothing, make_trial, write_steps

OUT = "layer0_relu_output_0"
RNG = np.random.default_rng(0)


def relu_layer(dead_units: int, units: int = 10, samples: int = 64) -> np.ndarray:
    """(samples, units) ReLU output: the first `dead_units` are 0 for every sample, the others
    are active in about half of the samples."""
    value = np.maximum(RNG.standard_normal((samples, units)), 0).astype(np.float32)
    value[:, :dead_units] = 0.0
    value[0, dead_units:] = 1.0  # every live unit active at least once
    return value


def verdicts(rule: DeadRelu, steps: range | list[int]) -> list[Verdict]:
    return [rule.judge_step(s) for s in steps]


def test_fires_when_more_than_half_of_a_layer_is_dead(tmp_path: Path) -> None:
    trial = make_trial(tmp_path, [(0, "TRAIN", 0, {OUT: relu_layer(6)}), (1, "TRAIN", 1, {OUT: relu_layer(4)})])
    assert verdicts(DeadRelu(trial), [0, 1]) == [Verdict.CONDITION_MET, Verdict.CONDITION_NOT_MET]


def test_threshold_layer_is_strict_and_parsed_from_strings(tmp_path: Path) -> None:
    trial = make_trial(tmp_path, [(0, "TRAIN", 0, {OUT: relu_layer(5)})])  # exactly 50 % dead
    assert DeadRelu(trial).judge_step(0) is Verdict.CONDITION_NOT_MET
    assert DeadRelu(trial, threshold_layer="40").judge_step(0) is Verdict.CONDITION_MET


def test_threshold_inactivity_counts_rarely_active_units_as_dead(tmp_path: Path) -> None:
    value = np.zeros((100, 4), dtype=np.float32)
    value[:3, :] = 1.0  # every unit active in 3 % of the samples
    trial = make_trial(tmp_path, [(0, "TRAIN", 0, {OUT: value})])
    assert DeadRelu(trial).judge_step(0) is Verdict.CONDITION_NOT_MET  # 3 % >= 1 %
    assert DeadRelu(trial, threshold_inactivity="5").judge_step(0) is Verdict.CONDITION_MET


def test_collection_members_are_inspected_whatever_their_name(tmp_path: Path) -> None:
    name = "Net_act_output_0"  # an nn.ReLU not named like *relu*, put in relu_output by the hook
    root = tmp_path / "t"
    writer_collections = (*COLLECTIONS, Collection("relu_output", tensor_names=frozenset({name})))
    writer = TrialWriter(root)
    writer.write_collections(writer_collections)
    writer.write_step(0, "TRAIN", 0, [(name, relu_layer(9))])
    writer.write_end_marker()
    trial = create_trial(str(root))
    assert DeadRelu(trial).judge_step(0) is Verdict.CONDITION_MET
    assert DeadRelu(trial, collection_names="none").judge_step(0) is Verdict.NOT_EVALUATED


def test_regex_selects_other_tensors(tmp_path: Path) -> None:
    trial = make_trial(tmp_path, [(0, "TRAIN", 0, {"Net_act_output_0": relu_layer(9), OUT: relu_layer(0)})])
    assert DeadRelu(trial).judge_step(0) is Verdict.CONDITION_NOT_MET
    assert DeadRelu(trial, tensor_regex="act_output,.*relu_output").judge_step(0) is Verdict.CONDITION_MET


def test_no_matching_tensor_is_not_evaluated_and_judged_nothing(tmp_path: Path) -> None:
    root = write_steps(tmp_path, [(0, "TRAIN", 0, {"Net_fc0.weight": np.ones((3, 3), np.float32)})])
    assert DeadRelu(create_trial(str(root))).judge_step(0) is Verdict.NOT_EVALUATED
    status = evaluate_trial(str(root), "DeadRelu", {})
    assert judged_nothing(status)  # no verdict without data


def test_nan_samples_are_not_samples_and_all_nan_units_are_left_out(tmp_path: Path) -> None:
    value = relu_layer(0, units=4)
    value[:, :3] = np.nan  # three units only NaN: left out; the fourth is alive
    value[5:, 3] = np.nan
    trial = make_trial(tmp_path, [(0, "TRAIN", 0, {OUT: value}), (1, "TRAIN", 1, {OUT: np.full((8, 2), np.nan)})])
    assert verdicts(DeadRelu(trial), [0, 1]) == [Verdict.CONDITION_NOT_MET, Verdict.NOT_EVALUATED]


def test_one_step_mixed_modes_and_missing_steps(tmp_path: Path) -> None:
    loss = {"CrossEntropyLoss_output_0": np.float32(1.0)}
    steps = [
        (0, "TRAIN", 0, {OUT: relu_layer(0), **loss}),
        (1, "TRAIN", 1, loss),  # relu output not saved at this step
        (2, "EVAL", 0, {OUT: relu_layer(8)}),  # EVAL activations are judged too
    ]
    trial = make_trial(tmp_path, steps)
    assert verdicts(DeadRelu(trial), [0, 1, 2]) == [Verdict.CONDITION_NOT_MET, Verdict.NOT_EVALUATED, Verdict.CONDITION_MET]
    single = make_trial(tmp_path / "one", [(0, "TRAIN", 0, {OUT: relu_layer(10)})])
    assert DeadRelu(single).judge_step(0) is Verdict.CONDITION_MET


def test_conv_and_1d_outputs(tmp_path: Path) -> None:
    conv = np.maximum(RNG.standard_normal((16, 2, 3, 3)), 0).astype(np.float32)
    conv[:, 0] = 0.0  # one dead channel = 9 of 18 units: not more than half
    trial = make_trial(tmp_path, [(0, "TRAIN", 0, {OUT: conv}), (1, "TRAIN", 1, {OUT: np.zeros(16, np.float32)}),
                                  (2, "TRAIN", 2, {OUT: np.float32(0.0)})])
    assert verdicts(DeadRelu(trial), [0, 1, 2]) == [Verdict.CONDITION_NOT_MET, Verdict.CONDITION_MET, Verdict.NOT_EVALUATED]


@pytest.mark.parametrize(("param", "value"), [("threshold_layer", "abc"), ("threshold_inactivity", "150"),
                                              ("tensor_regex", "(")])
def test_bad_parameters_name_the_parameter(tmp_path: Path, param: str, value: str) -> None:
    trial = make_trial(tmp_path, [(0, "TRAIN", 0, {OUT: relu_layer(0)})])
    with pytest.raises(RuleParameterError, match=param):
        DeadRelu(trial, **{param: value})
    status = evaluate_trial(str(tmp_path), "DeadRelu", {param: value})
    assert status.status is Status.ERROR
    assert param in status.status_details


@pytest.mark.parametrize(("trial_name", "fires"), [("healthy", False), ("healthy_eval", False),
                                                    ("healthy_relu", False), ("dead_relu", True)])
def test_fixture_trials(fixture_trials: Path, trial_name: str, fires: bool) -> None:
    status = evaluate_trial(str(fixture_trials / trial_name), "DeadRelu", {})
    if fires:
        assert status.status is Status.ISSUES_FOUND
        assert "rule DeadRelu at step 0 resulted" in status.status_details
    elif trial_name == "healthy_relu":
        assert status.status is Status.NO_ISSUES_FOUND, status.status_details
    else:  # no ReLU in these models: no verdict without data
        assert judged_nothing(status), status.status_details
