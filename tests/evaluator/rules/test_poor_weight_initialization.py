"""PoorWeightInitialization on written trials and on the smdebug fixtures."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sdlocal.evaluator.api import evaluate_trial
from sdlocal.evaluator.errors import RuleParameterError
from sdlocal.evaluator.rule import Verdict
from sdlocal.evaluator.rules import PoorWeightInitialization
from sdlocal.evaluator.status import Status
from sdlocal.trial import Collection, TrialWriter, create_trial
from tests.evaluator._trials import COLLECTIONS, judged_nothing, make_trial, train_steps

RNG = np.random.default_rng(2)
IN0, IN1 = "layer0_relu_input_0", "layer1_relu_input_0"
G = "gradient/Net_fc0.weight"
LOSS = "CrossEntropyLoss_output_0"


def acts(std0: float, std1: float) -> dict[str, np.ndarray]:
    return {IN0: (RNG.standard_normal((64, 8)) * std0).astype(np.float32),
            IN1: (RNG.standard_normal((64, 8)) * std1).astype(np.float32)}


def grad(std: float = 0.01) -> dict[str, np.ndarray]:
    return {G: (RNG.standard_normal((16, 16)) * std).astype(np.float32)}


def rule_verdicts(rule: PoorWeightInitialization, steps: range | list[int]) -> list[Verdict]:
    return [rule.judge_step(s) for s in steps]


def test_activation_variance_ratio(tmp_path: Path) -> None:
    # variance ratio 1 (silent), ~100 (fires), a zero-variance layer beside a live one (fires)
    steps = train_steps([acts(1.0, 1.0), acts(1.0, 0.1), {IN0: np.ones((4, 4), np.float32), IN1: acts(1, 1)[IN1]}])
    trial = make_trial(tmp_path, steps)
    assert rule_verdicts(PoorWeightInitialization(trial), range(3)) == [
        Verdict.CONDITION_NOT_MET, Verdict.CONDITION_MET, Verdict.CONDITION_MET]
    assert PoorWeightInitialization(trial, threshold="1000").judge_step(1) is Verdict.CONDITION_NOT_MET


def test_activation_inputs_from_the_collection_and_the_regex(tmp_path: Path) -> None:
    writer = TrialWriter(tmp_path)
    writer.write_collections((*COLLECTIONS, Collection("relu_input", tensor_names=frozenset({"Net_act_input_0"}))))
    writer.write_step(0, "TRAIN", 0, [("Net_act_input_0", np.float32(RNG.standard_normal((8, 8)) * 10)),
                                      (IN1, np.float32(RNG.standard_normal((8, 8))))])
    writer.write_end_marker()
    trial = create_trial(str(tmp_path))
    assert PoorWeightInitialization(trial).judge_step(0) is Verdict.CONDITION_MET  # 100x
    # one layer only (collection not inspected): nothing to compare
    assert PoorWeightInitialization(trial, collection_names="none").judge_step(0) is Verdict.NOT_EVALUATED


def test_gradient_spread(tmp_path: Path) -> None:
    trial = make_trial(tmp_path, train_steps([grad(0.01), grad(1e-5), {G: np.zeros((4, 4), np.float32)}]))
    assert rule_verdicts(PoorWeightInitialization(trial), range(3)) == [
        Verdict.CONDITION_NOT_MET, Verdict.CONDITION_MET, Verdict.CONDITION_MET]
    assert PoorWeightInitialization(trial, distribution_range="1e-6").judge_step(1) is Verdict.CONDITION_NOT_MET


def test_loss_must_go_below_the_first_loss_within_patience(tmp_path: Path) -> None:
    noisy_but_learning = [1.10, 1.12, 1.11, 1.09, 1.13, 1.12, 1.14, 1.15]  # 1.09 < 1.10 at step 3
    stalled = [1.10, 1.12, 1.10, 1.11, 1.13, 1.10, 1.0, 0.9]  # nothing below 1.10 by step 5
    for i, (losses, expected) in enumerate([(noisy_but_learning, Verdict.CONDITION_NOT_MET),
                                            (stalled, Verdict.CONDITION_MET)]):
        trial = make_trial(tmp_path / str(i), train_steps({LOSS: np.float32(v)} for v in losses))
        got = rule_verdicts(PoorWeightInitialization(trial), range(len(losses)))
        assert got[5] is expected
        assert all(v is Verdict.NOT_EVALUATED for k, v in enumerate(got) if k != 5)  # judged once, at step 5
    trial = make_trial(tmp_path / "p2", train_steps({LOSS: np.float32(v)} for v in stalled))
    # more patience: by step 7 the loss went below the first one
    assert rule_verdicts(PoorWeightInitialization(trial, patience="7"), range(8))[5:] == [
        Verdict.NOT_EVALUATED, Verdict.NOT_EVALUATED, Verdict.CONDITION_NOT_MET]


def test_nan_loss_is_never_lower_and_nan_gradients_are_left_out(tmp_path: Path) -> None:
    nan = np.float32("nan")
    trial = make_trial(tmp_path, train_steps([{LOSS: np.float32(1.0)}, *({LOSS: nan} for _ in range(5))]))
    assert PoorWeightInitialization(trial, patience="5").judge_step(0) is Verdict.NOT_EVALUATED
    rule = PoorWeightInitialization(trial)
    assert rule_verdicts(rule, range(6))[-1] is Verdict.CONDITION_MET
    g = grad(0.01)[G]
    g[:8] = np.nan
    trial = make_trial(tmp_path / "g", train_steps([{G: g}, {G: np.full((2, 2), np.nan, np.float32)}]))
    assert rule_verdicts(PoorWeightInitialization(trial), range(2)) == [Verdict.CONDITION_NOT_MET, Verdict.NOT_EVALUATED]


def test_only_the_first_steps_train_steps_and_missing_tensors(tmp_path: Path) -> None:
    bad = grad(0.0)
    steps = [(0, "TRAIN", 0, grad()), (1, "EVAL", 0, {**acts(1, 0.01)}), (2, "TRAIN", 1, {LOSS: np.float32(1)}),
             (3, "TRAIN", 2, bad), (4, "TRAIN", 3, bad)]
    trial = make_trial(tmp_path, steps)
    got = rule_verdicts(PoorWeightInitialization(trial, steps="3"), range(5))
    assert got == [
        Verdict.CONDITION_NOT_MET,
        Verdict.NOT_EVALUATED,  # EVAL step
        Verdict.NOT_EVALUATED,  # first loss = baseline, nothing else saved
        Verdict.CONDITION_MET,  # TRAIN step 2 < steps
        Verdict.NOT_EVALUATED,  # TRAIN step 3: past the first `steps` steps
    ]
    one = make_trial(tmp_path / "one", train_steps([{LOSS: np.float32(1)}]))
    assert judged_nothing(evaluate_trial(str(tmp_path / "one"), "PoorWeightInitialization", {}))  # no verdict without data
    assert PoorWeightInitialization(one).judge_step(0) is Verdict.NOT_EVALUATED


@pytest.mark.parametrize(("param", "value"), [("threshold", "ten"), ("distribution_range", "-1"), ("patience", "0"),
                                              ("steps", "2.5"), ("activation_inputs_regex", "[")])
def test_bad_parameters_name_the_parameter(tmp_path: Path, param: str, value: str) -> None:
    make_trial(tmp_path, train_steps([grad()]))
    trial = create_trial(str(tmp_path))
    with pytest.raises(RuleParameterError, match=param) as raised:
        PoorWeightInitialization(trial, **{param: value})
    assert raised.value.parameter == param
    status = evaluate_trial(str(tmp_path), "PoorWeightInitialization", {param: value})
    assert status.status is Status.ERROR and param in status.status_details


# The faulty fixtures were made with poor initializations or no learning at all:
# vanishing (std 1e-3 sigmoid stack), dead_relu (bias -20) and zero_weights: gradient spread < 0.001
# at step 0; exploding (std 50): its loss never goes below the first one; flat_loss (lr 0): neither.
@pytest.mark.parametrize(("trial_name", "fires_at"), [
    ("healthy", None), ("healthy_eval", None), ("healthy_relu", None), ("vanishing", 0), ("dead_relu", 0),
    ("zero_weights", 0), ("exploding", 2), ("flat_loss", 5)])
def test_fixture_trials(fixture_trials: Path, trial_name: str, fires_at: int | None) -> None:
    status = evaluate_trial(str(fixture_trials / trial_name), "PoorWeightInitialization", {})
    if fires_at is None:
        assert status.status is Status.NO_ISSUES_FOUND, status.status_details
    else:
        assert status.status is Status.ISSUES_FOUND
        assert f"rule PoorWeightInitialization at step {fires_at} resulted" in status.status_details


def test_a_diverged_step_is_judged_on_its_finite_values_without_numpy_warnings(tmp_path: Path) -> None:
    # a training that blew up: activation inputs with ±inf beside huge finite values, an inf loss
    blown = acts(1.0, 1.0)
    blown[IN0][0, :2] = [np.inf, -np.inf]
    blown[IN0][1, 0] = np.float32(3e38)
    trial = make_trial(tmp_path, train_steps([{**blown, LOSS: np.float32(np.inf)}, {**acts(1, 1), LOSS: np.float32(1.0)}]))
    with np.errstate(all="raise"):  # numpy's RuntimeWarnings would end the evaluator with Error
        verdicts = rule_verdicts(PoorWeightInitialization(trial), range(2))
    assert verdicts[0] is Verdict.CONDITION_MET  # 3e38 among unit-variance values: a huge variance ratio
    assert verdicts[1] is Verdict.CONDITION_NOT_MET


def test_a_saved_zero_variance_reduction_is_a_zero_variance_layer(tmp_path: Path) -> None:
    # a layer saved only as reductions with variance 0 (a dead layer) beside a live one: infinite ratio
    live = acts(1.0, 1.0)[IN1]
    trial = make_trial(tmp_path, train_steps([{"smdebug/reductions/variance/" + IN0: np.float32(0.0), IN1: live},
                                              {"smdebug/reductions/variance/" + IN0: np.float32(1.0), IN1: live}]))
    assert rule_verdicts(PoorWeightInitialization(trial), range(2)) == [Verdict.CONDITION_MET, Verdict.CONDITION_NOT_MET]


def test_an_embedding_gradient_pools_the_rows_it_received(tmp_path: Path) -> None:
    """A language model's healthy start: the embedding of a 5,000-token vocabulary got gradient in
    the 300 rows its batch used; pooled with its 4,700 zero rows, p95 − p5 was ~0 ("poor init")."""
    emb = np.zeros((5000, 16), np.float32)
    emb[RNG.choice(5000, 300, replace=False)] = (RNG.standard_normal((300, 16)) * 0.01).astype(np.float32)
    steps = train_steps([{"gradient/LM_embed.weight": emb, **grad(0.01)}])
    assert PoorWeightInitialization(make_trial(tmp_path, steps)).judge_step(0) is Verdict.CONDITION_NOT_MET
    flat = make_trial(tmp_path / "flat", train_steps([{"gradient/LM_embed.weight": emb * 1e-4, **grad(1e-6)}]))
    assert PoorWeightInitialization(flat).judge_step(0) is Verdict.CONDITION_MET  # received, but flat
