"""Overtraining: early-stopping test on periods of the training and validation losses."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sdlocal.evaluator.api import evaluate_trial
from sdlocal.evaluator.errors import RuleParameterError
from sdlocal.evaluator.loop import evaluate
from sdlocal.evaluator.rule import Verdict
from sdlocal.evaluator.rules import Overtraining
from sdlocal.evaluator.status import Status
from sdlocal.trial.trial import Trial
from tests.evaluator._trials import StepSpec, losses, make_trial

LOSS = "CrossEntropyLoss_output_0"
N, MET, NOT = Verdict.NOT_EVALUATED, Verdict.CONDITION_MET, Verdict.CONDITION_NOT_MET


def phases(*runs: tuple[str, list[float]]) -> list[StepSpec]:
    steps: list[StepSpec] = []
    mode_steps: dict[str, int] = {}
    for mode, values in runs:
        for v in values:
            ms = mode_steps.get(mode, 0)
            steps.append((len(steps), mode, ms, {LOSS: np.float32(v)}))
            mode_steps[mode] = ms + 1
    return steps


def judged(trial: Trial, **params: object) -> dict[int, Verdict]:
    """The evaluated steps and their verdicts."""
    rule = Overtraining(trial, **params)  # type: ignore[arg-type]
    verdicts = {s: rule.judge_step(s) for s in trial.steps()}
    return {s: v for s, v in verdicts.items() if v is not N}


def test_flat_training_loss_fires_after_patience_periods(tmp_path: Path) -> None:
    trial = make_trial(tmp_path, losses([1.0] * 60))
    # periods of 10 steps close at 9, 19, ...; the first sets the best, 5 more without improvement
    assert judged(trial) == {9: NOT, 19: NOT, 29: NOT, 39: NOT, 49: NOT, 59: MET}
    assert judged(trial, patience_train="2") == {9: NOT, 19: NOT, 29: MET, 39: MET, 49: MET, 59: MET}
    status = evaluate(trial, Overtraining(trial), sleep=lambda s: None)
    assert status.status is Status.ISSUES_FOUND and "at step 59 resulted" in status.status_details


def test_noisy_but_improving_loss_is_silent(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    values = 1.1 - 0.002 * np.arange(100) + rng.normal(0, 0.02, 100)  # per-step noise 10x the trend
    trial = make_trial(tmp_path, losses(list(values)))
    assert MET not in judged(trial).values()


def test_delta_is_the_required_improvement(tmp_path: Path) -> None:
    values = [1.0 - 0.0001 * i for i in range(60)]  # periods improve by 0.001: 0.005 over 5 < delta 0.01
    trial = make_trial(tmp_path, losses(values))
    assert judged(trial)[59] is MET
    assert MET not in judged(trial, delta="0.0005").values()
    assert MET not in judged(trial, delta="0").values()


def test_validation_loss_that_stops_improving(tmp_path: Path) -> None:
    runs: list[tuple[str, list[float]]] = []
    val = [1.0, 0.9, 0.8, 0.81, 0.82, 0.83, 0.85]  # best at pass 3, then rising
    for epoch, v in enumerate(val):
        runs += [("TRAIN", [1.0 - 0.05 * epoch] * 5), ("EVAL", [v, v])]
    trial = make_trial(tmp_path, phases(*runs))
    got = judged(trial, patience_validation="3")
    # a validation pass is closed (judged) by the next TRAIN step: passes end at global 6, 13, ...
    # train periods (5 steps each) are closed by the next EVAL step: 5, 12, ...
    eval_closes = [7 * (e + 1) for e in range(len(val) - 1)]  # the last pass stays open
    assert [got[s] for s in eval_closes] == [NOT, NOT, NOT, NOT, NOT, MET]
    assert all(got[7 * e + 5] is NOT for e in range(len(val)))  # training keeps improving by 0.05
    assert MET not in judged(trial).values()  # default patience_validation 10


def test_modes_nan_and_missing_steps(tmp_path: Path) -> None:
    spec = [(0, "GLOBAL", 0, {LOSS: np.float32(1.0)}),  # GLOBAL counts as training
            (1, "PREDICT", 0, {LOSS: np.float32(9.0)}),  # PREDICT ignored (closes nothing)
            (2, "TRAIN", 0, {LOSS: np.float32(np.nan)}),  # NaN skipped
            (3, "TRAIN", 1, {"Net_fc1.weight": np.ones(2)}),  # no loss at this step
            (4, "EVAL", 0, {LOSS: np.float32(1.0)})]  # closes the training period (one loss: 1.0)
    trial = make_trial(tmp_path, spec)
    rule = Overtraining(trial)
    assert [rule.judge_step(s) for s in range(5)] == [N, N, N, N, NOT]
    assert rule._curves[(rule._phase(None), LOSS)].best == 1.0  # type: ignore[index]
    one = make_trial(tmp_path / "one", losses([1.0]))
    assert evaluate(one, Overtraining(one), sleep=lambda s: None).status is Status.NO_ISSUES_FOUND
    nothing = make_trial(tmp_path / "none", [(0, "TRAIN", 0, {"Net_fc1.weight": np.ones(2)})])
    assert judged(nothing) == {}


def test_parameters(tmp_path: Path) -> None:
    trial = make_trial(tmp_path, losses([1.0] * 30))
    rule = Overtraining(trial, patience_train="3", patience_validation="4.0", delta="1e-3")
    assert list(rule.patience.values()) == [3, 4] and rule.delta == 0.001
    for name, bad in (("patience_train", "0"), ("patience_validation", "x"), ("delta", "-1"), ("delta", "True")):
        with pytest.raises(RuleParameterError, match=f"'{name}'"):
            Overtraining(trial, **{name: bad})  # type: ignore[arg-type]
    status = evaluate_trial(str(tmp_path), "Overtraining", {"delta": "much"})
    assert status.status is Status.ERROR and "'delta'" in status.status_details
    status = evaluate_trial(str(tmp_path), "Overtraining", {"patience_train": "2"})
    assert status.status is Status.ISSUES_FOUND and "at step 29 resulted" in status.status_details


# (trial, first step it fires at) at defaults; None = silent
FIXTURES = [
    ("healthy", None), ("healthy_eval", None), ("healthy_relu", None), ("exploding", None),
    # the loss cannot improve: lr 0 on one batch; dead ReLUs (only the head bias learns); lr 0
    ("flat_loss", 59), ("dead_relu", 59), ("zero_weights", 59),
]


@pytest.mark.parametrize(("trial_name", "fires_at"), FIXTURES)
def test_fixture_trials(fixture_trials: Path, trial_name: str, fires_at: int | None) -> None:
    status = evaluate_trial(str(fixture_trials / trial_name), "Overtraining", {})
    if fires_at is None:
        assert status.status is Status.NO_ISSUES_FOUND, status.status_details
    else:
        assert status.status is Status.ISSUES_FOUND and f"at step {fires_at} resulted" in status.status_details
