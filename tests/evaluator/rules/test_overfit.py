"""Overfit: validation passes against the training steps before them."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sdlocal.evaluator.api import evaluate_trial
from sdlocal.evaluator.errors import RuleParameterError
from sdlocal.evaluator.loop import evaluate
from sdlocal.evaluator.rule import Verdict
from sdlocal.evaluator.rules import Overfit
from sdlocal.evaluator.status import Status
from sdlocal.trial import create_trial
from sdlocal.trial.trial import Trial
from tests.evaluator._trials import StepSpec, make_trial

LOSS = "CrossEntropyLoss_output_0"
N, MET, NOT = Verdict.NOT_EVALUATED, Verdict.CONDITION_MET, Verdict.CONDITION_NOT_MET


def phases(*runs: tuple[str, list[float]], name: str = LOSS) -> list[StepSpec]:
    """Consecutive runs of one mode: ("TRAIN", [losses]), ("EVAL", [losses]), ..."""
    steps: list[StepSpec] = []
    mode_steps: dict[str, int] = {}
    for mode, values in runs:
        for v in values:
            ms = mode_steps.get(mode, 0)
            tensors = {"Net_fc1.weight": np.ones(2)} if v is None else {name: np.float32(v)}
            steps.append((len(steps), mode, ms, tensors))
            mode_steps[mode] = ms + 1
    return steps


def run(trial: Trial, **params: object) -> list[Verdict]:
    rule = Overfit(trial, **params)  # type: ignore[arg-type]
    return [rule.judge_step(s) for s in trial.steps()]


def test_fires_when_validation_loss_is_far_above_training(tmp_path: Path) -> None:
    trial = make_trial(tmp_path, phases(("TRAIN", [1.2, 1.0, 0.8]), ("EVAL", [1.05]), ("TRAIN", [0.6, 0.5]), ("EVAL", [1.0])))
    # pass 1: 1.05 vs mean(1.2, 1.0, 0.8) = 1.0 → +5 %; pass 2: 1.0 vs 0.55 → +82 %
    assert run(trial) == [N, N, N, NOT, N, N, MET]
    status = evaluate(trial, Overfit(trial), sleep=lambda s: None)
    assert status.status is Status.ISSUES_FOUND and "at step 6 resulted" in status.status_details


def test_silent_when_losses_agree(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    runs = []
    for epoch in range(5):
        level = 1.0 - 0.1 * epoch
        runs += [("TRAIN", list(level + rng.normal(0, 0.02, 8))), ("EVAL", list(level + rng.normal(0, 0.02, 3)))]
    trial = make_trial(tmp_path, phases(*runs))
    got = run(trial)
    assert MET not in got and got.count(NOT) == 15


def test_patience_counts_consecutive_passes(tmp_path: Path) -> None:
    spec = phases(("TRAIN", [1.0]), ("EVAL", [2.0, 2.0]), ("TRAIN", [1.0]), ("EVAL", [1.0]),
                  ("TRAIN", [1.0]), ("EVAL", [2.0]), ("TRAIN", [1.0]), ("EVAL", [2.0]))
    trial = make_trial(tmp_path, spec)
    # patience 2: the two EVAL steps of pass 1 are one pass; pass 2 resets; passes 3 and 4 fire
    assert run(trial, patience="2") == [N, NOT, NOT, N, NOT, N, NOT, N, MET]
    assert run(trial, patience="1") == [N, MET, MET, N, NOT, N, MET, N, MET]


def test_a_pass_is_judged_on_its_mean_so_far(tmp_path: Path) -> None:
    trial = make_trial(tmp_path, phases(("TRAIN", [1.0, 1.0]), ("EVAL", [1.0, 1.5, 1.0])))
    # means so far: 1.0, 1.25, 1.1667 → over 10 % from the second EVAL step
    assert run(trial) == [N, N, NOT, MET, MET]


def test_start_step_and_ratio_threshold(tmp_path: Path) -> None:
    spec = phases(("TRAIN", [3.0, 1.0]), ("EVAL", [1.5]), ("TRAIN", [1.0]), ("EVAL", [1.05]))
    trial = make_trial(tmp_path, spec)
    assert run(trial) == [N, N, NOT, N, NOT]  # 1.5 vs mean(3, 1) = 2
    assert run(trial, start_step="1") == [N, N, MET, N, NOT]  # step 0 ignored: 1.5 vs 1
    assert run(trial, ratio_threshold="0.01") == [N, N, NOT, N, MET]
    # a negative threshold alone no longer fires pass 1: its gap (−0.5) is not above the spread of
    # its training losses (3, 1: 1.41); pass 2 has one training value, no spread: the ratio decides
    assert run(trial, ratio_threshold="-0.5") == [N, N, NOT, N, MET]


def test_tensor_regex_selects_the_loss(tmp_path: Path) -> None:
    spec = phases(("TRAIN", [1.0]), ("EVAL", [2.0]), name="my_val_metric")
    trial = make_trial(tmp_path, spec)
    assert run(trial) == [N, N]  # not in the losses collection
    assert run(trial, tensor_regex="my_.*metric") == [N, MET]


def test_edge_cases(tmp_path: Path) -> None:
    # NaN losses skipped, a step without the loss, EVAL before any training, GLOBAL steps count as training
    spec = phases(("EVAL", [5.0]), ("TRAIN", [1.0, float("nan"), None]), ("EVAL", [float("nan"), 1.05]),
                  ("GLOBAL", [0.5]), ("EVAL", [1.0]))
    trial = make_trial(tmp_path, spec)
    assert run(trial) == [N, N, N, N, N, NOT, N, MET]
    # one step only, TRAIN only: never evaluated
    one = make_trial(tmp_path / "one", phases(("TRAIN", [1.0])))
    assert evaluate(one, Overfit(one), sleep=lambda s: None).status is Status.NO_ISSUES_FOUND
    # training loss 0: no ratio
    zero = make_trial(tmp_path / "zero", phases(("TRAIN", [0.0]), ("EVAL", [1.0])))
    assert run(zero) == [N, N]


def test_parameters(tmp_path: Path) -> None:
    trial = make_trial(tmp_path, phases(("TRAIN", [1.0]), ("EVAL", [2.0])))
    rule = Overfit(trial, start_step="5", patience="3", ratio_threshold="0.25")
    assert (rule.start_step, rule.patience, rule.ratio_threshold) == (5, 3, 0.25)
    for name, bad in (("patience", "0"), ("patience", "1.5"), ("start_step", "-1"), ("ratio_threshold", "high"),
                      ("tensor_regex", "(")):
        with pytest.raises(RuleParameterError, match=f"'{name}'"):
            Overfit(trial, **{name: bad})  # type: ignore[arg-type]
    status = evaluate_trial(str(tmp_path), "Overfit", {"patience": "soon"})
    assert status.status is Status.ERROR and "'patience'" in status.status_details
    status = evaluate_trial(str(tmp_path), "Overfit", {"ratio_threshold": "0.5", "patience": "1"})
    assert status.status is Status.ISSUES_FOUND


@pytest.mark.parametrize("trial_name", ["healthy", "healthy_eval", "healthy_relu", "flat_loss", "vanishing"])
def test_fixture_trials_are_silent(fixture_trials: Path, trial_name: str) -> None:
    status = evaluate_trial(str(fixture_trials / trial_name), "Overfit", {})
    assert status.status is Status.NO_ISSUES_FOUND, status.status_details


def test_fixture_healthy_eval_is_evaluated(fixture_trials: Path) -> None:
    # its EVAL losses are within a few % of the training ones: judged (not "not evaluated") and silent.
    # (A negative ratio_threshold no longer proves the comparison: the noise guard wants a gap above
    # the training spread.)
    trial = create_trial(str(fixture_trials / "healthy_eval"))
    rule = Overfit(trial)
    verdicts = [rule.judge_step(s) for s in trial.steps()]
    assert NOT in verdicts and MET not in verdicts


# ---- the noise guard: the gap must exceed the spread of the training losses -----------------------

HEALTHY_TRAIN = [0.010, 0.025, 0.012, 0.020, 0.0142]  # mean 0.01624, sample std 0.0062


def test_a_gap_inside_the_training_spread_is_noise(tmp_path: Path) -> None:
    # healthy_mlp-like: val 0.0208 vs train mean 0.0162 is +28 % (over 0.1), but the gap 0.0046 is
    # inside two standard deviations (2 × 0.0062) of the training losses: silent
    trial = make_trial(tmp_path, phases(("TRAIN", HEALTHY_TRAIN), ("EVAL", [0.0208, 0.0208])))
    assert run(trial) == [N] * 5 + [NOT, NOT]
    assert evaluate(trial, Overfit(trial), sleep=lambda s: None).status is Status.NO_ISSUES_FOUND
    # the same validation loss against one training value (no spread): the ratio test alone fires
    one = make_trial(tmp_path / "one", phases(("TRAIN", [0.01624]), ("EVAL", [0.0208])))
    assert run(one) == [N, MET]


def test_the_gap_is_compared_with_two_standard_deviations(tmp_path: Path) -> None:
    # train 1.0, 1.2: mean 1.1, sample std 0.1414 (2 std: 0.283); both validation losses are over +10 %
    inside = make_trial(tmp_path / "in", phases(("TRAIN", [1.0, 1.2]), ("EVAL", [1.37])))  # gap 0.27
    outside = make_trial(tmp_path / "out", phases(("TRAIN", [1.0, 1.2]), ("EVAL", [1.39])))  # gap 0.29
    assert run(inside) == [N, N, NOT]
    assert run(outside) == [N, N, MET]


def test_the_spread_is_of_the_training_steps_since_the_previous_pass(tmp_path: Path) -> None:
    # pass 1 follows noisy training (std 0.5); pass 2 follows steady training (std 0): same gap 0.3
    spec = phases(("TRAIN", [0.5, 1.5]), ("EVAL", [1.3]), ("TRAIN", [1.0, 1.0]), ("EVAL", [1.3]))
    assert run(make_trial(tmp_path, spec)) == [N, N, NOT, N, N, MET]


def test_a_memorizing_model_fires(tmp_path: Path) -> None:
    # training loss falls to ~0 and stays there; the validation loss rises pass after pass
    rng = np.random.default_rng(0)
    runs: list[tuple[str, list[float]]] = [("TRAIN", [1.1, 0.9, 0.7, 0.5, 0.4]), ("EVAL", [0.6, 0.62])]
    for val in (1.0, 1.8, 2.5, 3.0):
        runs += [("TRAIN", list(np.abs(rng.normal(0.002, 0.001, 5)))), ("EVAL", [val, val + 0.05])]
    trial = make_trial(tmp_path, phases(*runs))
    got = run(trial)
    assert got[5:7] == [NOT, NOT]  # the first pass: validation agrees with training
    assert got[12] is MET  # the first pass after memorizing
    status = evaluate(trial, Overfit(trial, patience="3"), sleep=lambda s: None)
    assert status.status is Status.ISSUES_FOUND and "at step 26 resulted" in status.status_details


def test_a_gap_far_below_the_first_training_loss_is_not_judged(tmp_path: Path) -> None:
    # a healthy model that fits both sets: train ~1e-4, val ~4e-3 (ratio 40, gap 0.004), steady
    # training (no spread to hide in); first training loss 1.2 → gaps under 0.012 are not judged
    fitted = phases(("TRAIN", [1.2, 0.8, 0.3]), ("EVAL", [0.35]),
                    ("TRAIN", [0.0001, 0.0001, 0.0001]), ("EVAL", [0.004]))
    assert run(make_trial(tmp_path / "fit", fitted))[-1] == NOT
    # the same pass with a gap of 0.02 (over 1 % of 1.2) is judged and fires
    worse = phases(("TRAIN", [1.2, 0.8, 0.3]), ("EVAL", [0.35]),
                   ("TRAIN", [0.0001, 0.0001, 0.0001]), ("EVAL", [0.02]))
    assert run(make_trial(tmp_path / "worse", worse))[-1] == MET
