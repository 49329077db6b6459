"""ClassImbalance on written label/prediction tensors and on the smdebug fixtures."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sdlocal.evaluator.api import evaluate_trial
from sdlocal.evaluator.errors import RuleParameterError
from sdlocal.evaluator.loop import evaluate
from sdlocal.evaluator.rule import Verdict
from sdlocal.evaluator.rules import ClassImbalance
from sdlocal.evaluator.status import Status
from sdlocal.trial.modes import ModeKeys
from sdlocal.trial.trial import Trial
from tests.evaluator._trials import StepSpec, judged_nothing, make_trial

LABELS = "CrossEntropyLoss_labels"
PREDS = "CrossEntropyLoss_predictions"
N, MET, NOT = Verdict.NOT_EVALUATED, Verdict.CONDITION_MET, Verdict.CONDITION_NOT_MET


def balanced(n: int = 60, classes: int = 3) -> np.ndarray:
    return np.arange(n) % classes


def steps_of(pairs: list[tuple[np.ndarray, np.ndarray | None]], mode: str = "TRAIN", start: int = 0) -> list[StepSpec]:
    out: list[StepSpec] = []
    for i, (labels, preds) in enumerate(pairs):
        tensors: dict[str, object] = {LABELS: labels}
        if preds is not None:
            tensors[PREDS] = preds
        out.append((start + i, mode, i, tensors))
    return out


def run(trial: Trial, **params: object) -> list[Verdict]:
    rule = ClassImbalance(trial, **params)  # type: ignore[arg-type]
    return [rule.judge_step(s) for s in trial.steps()]


def test_imbalanced_labels_fire_after_samples(tmp_path: Path) -> None:
    labels = np.array([0] * 60 + [1] * 4)  # 15:1
    trial = make_trial(tmp_path, steps_of([(labels, labels)] * 10))
    assert run(trial) == [N] * 7 + [MET] * 3  # 8 × 64 = 512 ≥ 500 labels
    assert run(trial, samples="100") == [N, MET] + [MET] * 8
    assert run(trial, samples="100", threshold_imbalance="20") == [N] + [NOT] * 9
    status = evaluate(trial, ClassImbalance(trial), sleep=lambda s: None)
    assert status.status is Status.ISSUES_FOUND and "at step 7 resulted" in status.status_details


def test_balanced_and_well_predicted_is_silent(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    pairs = []
    for _ in range(30):
        labels = rng.integers(0, 3, 64)
        preds = np.where(rng.random(64) < 0.8, labels, rng.integers(0, 3, 64))  # 80 % accurate
        pairs.append((labels, preds))
    trial = make_trial(tmp_path, steps_of(pairs))
    got = run(trial)
    assert MET not in got and got.count(NOT) == 23


def test_a_class_that_is_always_mispredicted(tmp_path: Path) -> None:
    labels = balanced()
    preds = np.where(labels == 2, 0, labels)  # class 2 always predicted as 0
    trial = make_trial(tmp_path, steps_of([(labels, preds)] * 6))
    # labels judged from 120 (step 1); mispredictions once 2 × 100 pairs were seen (step 3)
    assert run(trial, samples="100") == [N, NOT, NOT, MET, MET, MET]
    assert run(trial, samples="100", threshold_misprediction="1.0") == [N, NOT, NOT, NOT, NOT, NOT]


def test_early_mispredictions_are_warm_up(tmp_path: Path) -> None:
    labels = balanced()
    untrained = np.zeros(60, np.int64)  # the untrained model predicts class 0 for everything
    pairs = [(labels, untrained)] * 2 + [(labels, labels)] * 6
    trial = make_trial(tmp_path, steps_of(pairs))
    # window = the last ≥ 100 pairs (two steps): clean from step 3 on, when 200 have been seen
    assert run(trial, samples="100") == [N] + [NOT] * 7


def test_window_follows_a_model_that_gets_worse(tmp_path: Path) -> None:
    labels = balanced()
    pairs = [(labels, labels)] * 4 + [(labels, np.where(labels == 1, 2, labels))] * 3
    trial = make_trial(tmp_path, steps_of(pairs))
    # cumulative, class 1 would be 3/7 mispredicted; over the last 100 pairs it is 100 %
    assert run(trial, samples="100") == [N, NOT, NOT, NOT, NOT, MET, MET]


def test_argmax_of_scores(tmp_path: Path) -> None:
    labels = balanced()
    scores = np.eye(3)[np.where(labels == 2, 0, labels)]  # one-hot scores, class 2 → 0
    trial = make_trial(tmp_path, steps_of([(labels, scores)] * 4))
    assert run(trial, samples="60")[-1] is MET  # scores have one more dimension: argmax applied
    flat_scores = np.eye(3)[[0, 1, 1]]  # argmax=True: a (3, 3) score matrix for 3 labels
    trial = make_trial(tmp_path / "b", steps_of([(np.array([[0], [1], [2]]), flat_scores)] * 10))
    assert run(trial, samples="3", argmax="True", threshold_misprediction="0.5")[-1] is NOT  # < 10 per class
    for flag in ("True", "true", True):
        assert ClassImbalance(trial, argmax=flag).argmax is True


def test_edge_cases(tmp_path: Path) -> None:
    labels = balanced().astype(np.float32)
    with_nan = labels.copy()
    with_nan[:30] = np.nan
    spec = steps_of([(with_nan, labels), (labels, None)])  # NaN labels dropped; labels without predictions
    spec.append((2, "TRAIN", 2, {"Net_fc1.weight": np.ones(2)}))  # a step without labels
    spec.append((3, "EVAL", 0, {LABELS: np.zeros(90), PREDS: np.zeros(90)}))  # EVAL counts on its own
    trial = make_trial(tmp_path, spec)
    rule = ClassImbalance(trial, samples="90")
    assert [rule.judge_step(s) for s in range(4)] == [N, NOT, N, NOT]
    assert rule._state[ModeKeys.TRAIN].labels_seen == 90  # 30 + 60: the NaN labels dropped
    one = make_trial(tmp_path / "one", steps_of([(labels, labels)]))
    assert evaluate(one, ClassImbalance(one), sleep=lambda s: None).status is Status.NO_ISSUES_FOUND
    assert run(one, samples="10") == [NOT]


def test_custom_regexes(tmp_path: Path) -> None:
    labels = np.array([0] * 60 + [1] * 4)
    trial = make_trial(tmp_path, [(0, "TRAIN", 0, {"y_true": labels, "y_pred": labels})])
    assert run(trial, samples="10") == [N]  # default regexes match nothing
    assert run(trial, samples="10", labels_regex="y_true", predictions_regex="y_pred") == [MET]


def test_parameters(tmp_path: Path) -> None:
    trial = make_trial(tmp_path, steps_of([(balanced(), balanced())]))
    rule = ClassImbalance(trial, threshold_imbalance="5", threshold_misprediction="0.5", samples="1e2")
    assert (rule.threshold_imbalance, rule.threshold_misprediction, rule.samples) == (5.0, 0.5, 100)
    for name, bad in (("threshold_imbalance", "0.5"), ("threshold_misprediction", "1.5"), ("samples", "0"),
                      ("samples", "many"), ("argmax", "maybe"), ("labels_regex", "("), ("predictions_regex", "")):
        with pytest.raises(RuleParameterError, match=f"'{name}'"):
            ClassImbalance(trial, **{name: bad})  # type: ignore[arg-type]
    status = evaluate_trial(str(tmp_path), "ClassImbalance", {"samples": "lots"})
    assert status.status is Status.ERROR and "'samples'" in status.status_details


@pytest.mark.parametrize("trial_name", ["healthy", "healthy_eval", "healthy_relu", "exploding"])
def test_fixture_trials_without_labels_judged_nothing(fixture_trials: Path, trial_name: str) -> None:
    status = evaluate_trial(str(fixture_trials / trial_name), "ClassImbalance", {})
    assert judged_nothing(status), status.status_details  # no verdict without data


def test_one_value_per_sample_is_never_argmaxed(tmp_path: Path) -> None:
    # (N, 1) binary probabilities beside (N,) labels: "one more dimension", but argmax over a single
    # score would call every sample class 0; they are rounded at 0.5 instead (and argmax=True on
    # (N,) ids must not collapse the batch into one id)
    labels = np.arange(60) % 2
    good = np.where(labels == 1, 0.9, 0.1).reshape(-1, 1)
    trial = make_trial(tmp_path, steps_of([(labels, good)] * 4))
    assert run(trial, samples="60")[-1] is NOT
    ids = labels.astype(np.float64)
    trial = make_trial(tmp_path / "ids", steps_of([(labels, ids)] * 4))
    assert run(trial, samples="60", argmax="True")[-1] is NOT
    wrong = np.zeros(60)  # class 1 always predicted as 0
    trial = make_trial(tmp_path / "wrong", steps_of([(labels, wrong)] * 4))
    assert run(trial, samples="60", argmax="True")[-1] is MET
