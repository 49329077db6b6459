"""Built-in rules on small real trials: edge cases and documented choices."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sdlocal.evaluator.errors import RuleParameterError
from sdlocal.evaluator.loop import evaluate
from sdlocal.evaluator.rule import Verdict
from sdlocal.evaluator.rules import (
    AllZero,
    ExplodingTensor,
    LossNotDecreasing,
    UnchangedTensor,
    VanishingGradient,
    builtin_rule_classes,
)
from sdlocal.evaluator.status import Status
from tests.evaluator._trials import losses, make_trial, train_steps

W = "Net_fc1.weight"
G = "gradient/Net_fc1.weight"
LOSS = "CrossEntropyLoss_output_0"


def verdicts(rule, steps):  # type: ignore[no-untyped-def]
    return [rule.judge_step(s) for s in steps]


# ---- LossNotDecreasing -------------------------------------------------------------------------

def test_loss_not_decreasing_documented_example(tmp_path: Path) -> None:
    trial = make_trial(tmp_path, losses([0.3, 0.33, 0.31, 0.30, 0.28], steps=[0, 4, 8, 12, 16]))
    rule = LossNotDecreasing(trial, num_steps="10")
    got = verdicts(rule, [0, 4, 8, 12, 16])
    assert got == [
        Verdict.CONDITION_NOT_MET,  # baseline
        Verdict.NOT_EVALUATED,
        Verdict.NOT_EVALUATED,
        Verdict.CONDITION_MET,  # 0.30 is not 0.1 % below 0.3
        Verdict.NOT_EVALUATED,  # within num_steps of the new baseline (12)
    ]
    status = evaluate(make_trial(tmp_path / "again", losses([0.3, 0.33, 0.31, 0.30, 0.28], steps=[0, 4, 8, 12, 16])),
                      LossNotDecreasing(trial, num_steps="10"), sleep=lambda s: None)
    assert status.status is Status.ISSUES_FOUND
    assert "at step 12 resulted in the condition being met" in status.status_details


def test_loss_not_decreasing_silent_on_decreasing_loss(tmp_path: Path) -> None:
    trial = make_trial(tmp_path, losses([1.0 - 0.01 * i for i in range(40)]))
    rule = LossNotDecreasing(trial)
    assert not any(v.fired for v in verdicts(rule, range(40)))


def test_loss_not_decreasing_increase_threshold(tmp_path: Path) -> None:
    # at step 30 the loss decreased from step 20 (0.9 → 0.8) but is 60 % above the lowest (0.5)
    spec = losses([1.0, 0.5, 0.9, 0.8], steps=[0, 10, 20, 30])
    rule = LossNotDecreasing(make_trial(tmp_path, spec))
    assert verdicts(rule, [0, 10, 20, 30]) == [
        Verdict.CONDITION_NOT_MET, Verdict.CONDITION_NOT_MET, Verdict.CONDITION_MET, Verdict.CONDITION_MET]
    rule = LossNotDecreasing(make_trial(tmp_path / "b", spec), increase_threshold_percent="100")
    assert not verdicts(rule, [0, 10, 20, 30])[-1].fired


def test_loss_not_decreasing_prefers_eval_and_keeps_per_mode_baselines(tmp_path: Path) -> None:
    steps = []
    g = 0
    for i in range(12):  # TRAIN loss flat (would fire), EVAL loss decreasing
        steps.append((g, "TRAIN", i, {LOSS: np.float32(1.0)}))
        g += 1
        steps.append((g, "EVAL", i, {LOSS: np.float32(1.0 - 0.05 * i)}))
        g += 1
    trial = make_trial(tmp_path, steps)
    rule = LossNotDecreasing(trial)
    got = verdicts(rule, range(g))
    assert not any(v.fired for v in got)
    assert all(v is Verdict.NOT_EVALUATED for v in got[0::2])  # TRAIN steps skipped
    rule = LossNotDecreasing(make_trial(tmp_path / "t", steps), mode="TRAIN")
    assert any(v.fired for v in verdicts(rule, range(g)))


def test_loss_not_decreasing_skips_nan_and_needs_losses(tmp_path: Path) -> None:
    trial = make_trial(tmp_path, losses([1.0, float("nan"), float("nan")], steps=[0, 10, 20]))
    assert verdicts(LossNotDecreasing(trial), [0, 10, 20])[1:] == [Verdict.NOT_EVALUATED, Verdict.NOT_EVALUATED]
    with pytest.raises(RuleParameterError, match="use_losses_collection"):
        LossNotDecreasing(trial, use_losses_collection="False")


# ---- VanishingGradient -----------------------------------------------------------------------

def test_vanishing_gradient_threshold_and_eval_steps(tmp_path: Path) -> None:
    steps = [
        (0, "TRAIN", 0, {G: np.full((2, 2), 1e-3, np.float32), W: np.ones((2, 2), np.float32)}),
        (1, "EVAL", 0, {W: np.ones((2, 2), np.float32)}),  # no gradients in EVAL
        (2, "TRAIN", 1, {G: np.full((2, 2), -1e-9, np.float32)}),  # |mean| uses abs
        (3, "TRAIN", 2, {G: np.full((2, 2), np.nan, np.float32)}),
    ]
    trial = make_trial(tmp_path, steps)
    got = verdicts(VanishingGradient(trial), range(4))
    assert got == [Verdict.CONDITION_NOT_MET, Verdict.NOT_EVALUATED, Verdict.CONDITION_MET, Verdict.NOT_EVALUATED]
    assert VanishingGradient(trial, threshold="1e-2").judge_step(0).fired


@pytest.mark.parametrize("bad", ["abc", "-1", "None"])
def test_vanishing_gradient_bad_threshold_names_parameter(tmp_path: Path, bad: str) -> None:
    trial = make_trial(tmp_path, train_steps([{G: np.ones(2)}]))
    with pytest.raises(RuleParameterError) as info:
        VanishingGradient(trial, threshold=bad)
    assert (info.value.rule, info.value.parameter) == ("VanishingGradient", "threshold")


# ---- ExplodingTensor -------------------------------------------------------------------------

def test_exploding_tensor_nan_inf_and_only_nan(tmp_path: Path) -> None:
    steps = train_steps([
        {W: np.ones(3, np.float32), "counts": np.arange(3)},
        {W: np.array([1.0, np.inf, 0.0], np.float32)},
        {W: np.array([1.0, np.nan, 0.0], np.float32)},
    ])
    trial = make_trial(tmp_path, steps)
    assert verdicts(ExplodingTensor(trial), range(3)) == [Verdict.CONDITION_NOT_MET, Verdict.CONDITION_MET, Verdict.CONDITION_MET]
    assert [v.fired for v in verdicts(ExplodingTensor(trial, only_nan="True"), range(3))] == [False, False, True]
    # restricted to a collection that does not hold the bad tensor
    assert not any(v.fired for v in verdicts(ExplodingTensor(trial, collection_names="losses"), range(3)))
    assert verdicts(ExplodingTensor(trial, tensor_regex="fc1"), [2]) == [Verdict.CONDITION_MET]


def test_exploding_tensor_bad_regex_names_parameter(tmp_path: Path) -> None:
    trial = make_trial(tmp_path, train_steps([{W: np.ones(1)}]))
    with pytest.raises(RuleParameterError, match="tensor_regex"):
        ExplodingTensor(trial, tensor_regex="(unclosed")


# ---- AllZero ---------------------------------------------------------------------------------

def test_all_zero_threshold_and_required_selection(tmp_path: Path) -> None:
    half = np.array([0.0, 0.0, 1.0, 2.0], np.float32)
    trial = make_trial(tmp_path, train_steps([{W: half}, {W: np.zeros(4, np.float32)}, {W: np.zeros(0, np.float32)}]))
    assert verdicts(AllZero(trial, collection_names="weights"), range(3)) == [
        Verdict.CONDITION_NOT_MET, Verdict.CONDITION_MET, Verdict.NOT_EVALUATED]
    assert AllZero(trial, tensor_regex="weight", threshold="50").judge_step(0).fired
    with pytest.raises(RuleParameterError, match="collection_names or tensor_regex is required"):
        AllZero(trial)
    with pytest.raises(RuleParameterError, match="threshold"):
        AllZero(trial, collection_names="weights", threshold="150")


# ---- UnchangedTensor -------------------------------------------------------------------------

def test_unchanged_tensor_needs_num_steps_values(tmp_path: Path) -> None:
    same = np.ones(3, np.float32)
    trial = make_trial(tmp_path, train_steps([{W: same}, {W: same}, {W: same + 1}, {W: same + 1}, {W: same + 1 + 1e-7}]))
    rule = UnchangedTensor(trial, collection_names="weights")
    assert verdicts(rule, range(5)) == [
        Verdict.NOT_EVALUATED, Verdict.NOT_EVALUATED,  # fewer than 3 values yet
        Verdict.CONDITION_NOT_MET, Verdict.CONDITION_NOT_MET,
        Verdict.CONDITION_MET,  # 2, 2, 2+1e-9 are allclose
    ]
    assert UnchangedTensor(make_trial(tmp_path / "two", train_steps([{W: same}, {W: same}])), num_steps="2").judge_step(1).fired is False
    rule2 = UnchangedTensor(make_trial(tmp_path / "b", train_steps([{W: same}, {W: same}])), num_steps="2")
    assert verdicts(rule2, [0, 1]) == [Verdict.NOT_EVALUATED, Verdict.CONDITION_MET]


def test_unchanged_tensor_compares_within_a_mode_and_nan(tmp_path: Path) -> None:
    a, b, c = (np.full(2, v, np.float32) for v in (1.0, 2.0, 3.0))
    steps = [(0, "TRAIN", 0, {W: a}), (1, "EVAL", 0, {W: b}), (2, "TRAIN", 1, {W: b}),
             (3, "EVAL", 1, {W: c}), (4, "TRAIN", 2, {W: c})]
    # globally b, b and c, c repeat, but within TRAIN (a, b, c) and EVAL (b, c) nothing is unchanged
    assert not any(v.fired for v in verdicts(UnchangedTensor(make_trial(tmp_path, steps), num_steps="2"), range(5)))
    nan = np.array([np.nan, 1.0], np.float32)
    t = make_trial(tmp_path / "nan", train_steps([{W: nan}] * 3))
    assert not verdicts(UnchangedTensor(t), range(3))[-1].fired
    t = make_trial(tmp_path / "nan2", train_steps([{W: nan}] * 3))
    assert verdicts(UnchangedTensor(t, equal_nan="True"), range(3))[-1].fired


def test_unchanged_tensor_skips_integer_tensors_unless_named(tmp_path: Path) -> None:
    # an untrained classifier predicting class 0 for three batches: class ids, not a stalled tensor
    preds = "CrossEntropyLoss_predictions"
    ids = np.zeros(32, np.int64)
    steps = train_steps([{preds: ids, W: np.full(2, float(i), np.float32)} for i in range(3)])
    trial = make_trial(tmp_path, steps)
    assert verdicts(UnchangedTensor(trial), range(3)) == [
        Verdict.NOT_EVALUATED, Verdict.NOT_EVALUATED, Verdict.CONDITION_NOT_MET]  # the weights changed
    assert verdicts(UnchangedTensor(trial, tensor_regex="predictions"), range(3))[-1] is Verdict.CONDITION_MET


def test_unchanged_tensor_bad_parameters(tmp_path: Path) -> None:
    trial = make_trial(tmp_path, train_steps([{W: np.ones(1)}]))
    for name, bad in (("num_steps", "1"), ("rtol", "x"), ("equal_nan", "yes please")):
        with pytest.raises(RuleParameterError) as info:
            UnchangedTensor(trial, **{name: bad})
        assert info.value.parameter == name


def test_one_step_trial_gives_no_issues(tmp_path: Path) -> None:
    trial = make_trial(tmp_path, train_steps([{W: np.ones(2, np.float32), G: np.ones(2, np.float32), LOSS: np.float32(1)}]))
    for rule in (VanishingGradient(trial), ExplodingTensor(trial), AllZero(trial, collection_names="weights"),
                 UnchangedTensor(trial), LossNotDecreasing(trial)):
        assert evaluate(trial, rule, sleep=lambda s: None).status is Status.NO_ISSUES_FOUND


def test_rules_use_reductions_when_only_reductions_were_saved(tmp_path: Path) -> None:
    steps = [(0, "TRAIN", 0, {
        "smdebug/reductions/abs_mean/gradient/x": np.float32(1e-9),
        "smdebug/reductions/abs_max/gradient/x": np.float32(0.0),
        "smdebug/reductions/max/w": np.float32(np.nan),
    })]
    trial = make_trial(tmp_path, steps)
    assert VanishingGradient(trial).judge_step(0) is Verdict.CONDITION_MET  # saved abs_mean 1e-9
    assert ExplodingTensor(trial, tensor_regex="^w$").judge_step(0) is Verdict.CONDITION_MET  # saved max NaN
    assert AllZero(trial, tensor_regex="x").judge_step(0) is Verdict.CONDITION_MET  # saved abs_max 0
    assert AllZero(trial, tensor_regex="x", threshold="50").judge_step(0) is Verdict.CONDITION_MET


def test_a_step_the_trial_lacks_is_not_evaluated_by_any_data_rule(tmp_path: Path) -> None:
    # a step the index does not know has no mode: every rule that reads data says "not evaluated"
    # (LossNotDecreasing used to raise ValueError on ModeKeys(None), which ends the evaluator Error)
    trial = make_trial(tmp_path, losses([1.0, 0.9]))
    required: dict[str, dict[str, Any]] = {"AllZero": {"tensor_regex": "loss"}, "SimilarAcrossRuns": {"other_trials": [trial]},
                "TensorVariance": {"max_threshold": "1", "tensor_regex": "loss"}}
    for cls in builtin_rule_classes():
        if cls.__name__ == "StalledTrainingRule":  # judges time: any step it is given is progress
            continue
        rule = cls(trial, **required.get(cls.__name__, {}))
        assert rule.judge_step(7) is Verdict.NOT_EVALUATED, cls.__name__
