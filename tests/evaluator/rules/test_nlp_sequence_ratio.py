"""NLPSequenceRatio on written trials and on the smdebug fixtures."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sdlocal.evaluator.api import evaluate_trial
from sdlocal.evaluator.errors import RuleParameterError
from sdlocal.evaluator.rule import Verdict
from sdlocal.evaluator.rules import NLPSequenceRatio
from sdlocal.evaluator.status import Status
from sdlocal.trial import Collection, TrialWriter, create_trial
from tests.evaluator._trials import COLLECTIONS, judged_nothing, make_trial, train_steps

SEQ = "Net_embedding0_input_0"


def sequences(padding_percent: int, token: int = 0) -> np.ndarray:
    """4 sequences of 25 token ids: `padding_percent` % of them `token`, the rest ids 5..."""
    flat = np.arange(100, dtype=np.int64) + 5
    flat[:padding_percent] = token
    return flat.reshape(4, 25)


def test_padding_majority_fires(tmp_path: Path) -> None:
    trial = make_trial(tmp_path, train_steps([{SEQ: sequences(60)}, {SEQ: sequences(50)}, {SEQ: sequences(10)}]))
    rule = NLPSequenceRatio(trial)
    assert [rule.judge_step(s) for s in range(3)] == [Verdict.CONDITION_MET, Verdict.CONDITION_NOT_MET,
                                                  Verdict.CONDITION_NOT_MET]


def test_token_lists_and_thresholds_from_strings(tmp_path: Path) -> None:
    trial = make_trial(tmp_path, train_steps([{SEQ: sequences(30, token=1)}]))
    assert NLPSequenceRatio(trial).judge_step(0) is Verdict.CONDITION_NOT_MET  # token 0 absent
    assert NLPSequenceRatio(trial, token_values="0,1", token_thresholds_percent="50,20").judge_step(0) is Verdict.CONDITION_MET
    assert NLPSequenceRatio(trial, token_values="0, 1", token_thresholds_percent="25").judge_step(0) is Verdict.CONDITION_MET
    assert NLPSequenceRatio(trial, token_values=[1], token_thresholds_percent=[40]).judge_step(0) is Verdict.CONDITION_NOT_MET


def test_float_tensors_nan_collection_members_modes_and_missing_steps(tmp_path: Path) -> None:
    writer = TrialWriter(tmp_path)
    writer.write_collections((*COLLECTIONS, Collection("input_sequence", tensor_names=frozenset({"tokens"}))))
    floats = sequences(40).astype(np.float32)
    floats[3, 20:] = np.nan  # 5 NaN left out: 40 of 95 are padding (42 %)
    writer.write_step(0, "TRAIN", 0, [("tokens", floats)])
    writer.write_step(1, "TRAIN", 1, [("CrossEntropyLoss_output_0", np.float32(1))])
    writer.write_step(2, "EVAL", 0, [("tokens", sequences(80).astype(np.float32))])
    writer.write_step(3, "EVAL", 1, [("tokens", np.full((2, 2), np.nan, np.float32))])
    writer.write_end_marker()
    rule = NLPSequenceRatio(create_trial(str(tmp_path)))
    assert [rule.judge_step(s) for s in range(4)] == [
        Verdict.CONDITION_NOT_MET, Verdict.NOT_EVALUATED, Verdict.CONDITION_MET, Verdict.NOT_EVALUATED]
    assert NLPSequenceRatio(create_trial(str(tmp_path)), token_thresholds_percent="41").judge_step(0) is Verdict.CONDITION_MET


def test_no_sequences_and_one_step(tmp_path: Path) -> None:
    trial = make_trial(tmp_path, train_steps([{"x": np.zeros(10, np.float32)}]))
    assert NLPSequenceRatio(trial).judge_step(0) is Verdict.NOT_EVALUATED
    assert judged_nothing(evaluate_trial(str(tmp_path), "NLPSequenceRatio", {}))  # no verdict without data
    make_trial(tmp_path / "one", train_steps([{SEQ: sequences(90)}]))
    assert evaluate_trial(str(tmp_path / "one"), "NLPSequenceRatio", {}).status is Status.ISSUES_FOUND


@pytest.mark.parametrize(("params", "param"), [
    ({"token_values": "pad"}, "token_values"), ({"token_values": ""}, "token_values"),
    ({"token_thresholds_percent": "150"}, "token_thresholds_percent"),
    ({"token_values": "0,1,2", "token_thresholds_percent": "10,20"}, "token_thresholds_percent"),
    ({"token_values": "0,1,0", "token_thresholds_percent": "10,20,30"}, "token_values"),
    ({"tensor_regex": "("}, "tensor_regex")])
def test_bad_parameters_name_the_parameter(tmp_path: Path, params: dict[str, str], param: str) -> None:
    trial = make_trial(tmp_path, train_steps([{SEQ: sequences(0)}]))
    with pytest.raises(RuleParameterError, match=param):
        NLPSequenceRatio(trial, **params)
    status = evaluate_trial(str(tmp_path), "NLPSequenceRatio", params)
    assert status.status is Status.ERROR and param in status.status_details


@pytest.mark.parametrize("trial_name", ["healthy", "healthy_eval", "healthy_relu"])
def test_fixture_trials_without_sequences_judged_nothing(fixture_trials: Path, trial_name: str) -> None:
    status = evaluate_trial(str(fixture_trials / trial_name), "NLPSequenceRatio", {})
    assert judged_nothing(status), status.status_details  # no verdict without data
