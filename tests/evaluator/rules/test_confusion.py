"""Confusion on written trials and on the smdebug fixtures."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from evaluator.api import evaluate_trial
from evaluator.errors import RuleParameterError
from evaluator.rule import Verdict
from evaluator.rules import Confusion
from evaluator.status import Status
from tests.evaluator._trials import COLLECTIONS, make_trial
from trial import Collection, TrialWriter, create_trial

LABELS, PREDS = "CrossEntropyLoss_input_1", "CrossEntropyLoss_input_0"
CLASSIFIER = (*COLLECTIONS, Collection("labels", include_regex=("_input_1$",)),
              Collection("predictions", include_regex=("Loss_input_0$",)))


def write(root: Path, steps: list[tuple[int, str, int, dict[str, np.ndarray]]]) -> Path:
    writer = TrialWriter(root)
    writer.write_collections(CLASSIFIER)
    for step, mode, mode_step, tensors in steps:
        writer.write_step(step, mode, mode_step, list(tensors.items()))
    writer.write_end_marker()
    return root


def logits(ids: list[int], classes: int = 3) -> np.ndarray:
    out = np.zeros((len(ids), classes), np.float32)
    out[np.arange(len(ids)), ids] = 5.0
    return out


TRUTH = [0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2]


def batch(predicted: list[int]) -> dict[str, np.ndarray]:
    return {LABELS: np.array(TRUTH, np.int64), PREDS: logits(predicted)}


def test_identity_is_silent_and_confusion_fires(tmp_path: Path) -> None:
    one_wrong = list(TRUTH)
    one_wrong[0] = 1  # class 0: 80 % on the diagonal, 20 % predicted as 1
    root = write(tmp_path, [(0, "TRAIN", 0, batch(TRUTH)), (1, "TRAIN", 1, batch(one_wrong))])
    rule = Confusion(create_trial(str(root)))
    assert [rule.invoke(s) for s in (0, 1)] == [Verdict.CONDITION_NOT_MET, Verdict.CONDITION_MET]
    lenient = Confusion(create_trial(str(root)), min_diag="0.8", max_off_diag="0.2")
    assert lenient.invoke(1) is Verdict.CONDITION_NOT_MET
    assert Confusion(create_trial(str(root)), min_diag="0.8").invoke(1) is Verdict.CONDITION_MET  # off-diagonal 0.2


def test_labels_and_predictions_by_tensor_name_and_class_ids(tmp_path: Path) -> None:
    truth = np.array([0, 1, 2, 3], np.int64)
    trial = make_trial(tmp_path, [(0, "TRAIN", 0, {"labels": truth, "predictions": truth.astype(np.float32)}),
                                  (1, "TRAIN", 1, {"labels": truth, "predictions": np.array([0, 1, 2, 2], np.float32)})])
    rule = Confusion(trial)  # no collections: the tensors named "labels" / "predictions"
    assert [rule.invoke(s) for s in (0, 1)] == [Verdict.CONDITION_NOT_MET, Verdict.CONDITION_MET]
    assert Confusion(trial, labels="none", predictions="none").invoke(0) is Verdict.NOT_EVALUATED


def test_category_no_inferred_or_given(tmp_path: Path) -> None:
    m = Confusion(make_trial(tmp_path, [(0, "TRAIN", 0, {"x": np.float32(0)})]))
    assert m.matrix(np.array([0, 1]), logits([0, 1], classes=4)).shape == (4, 4)  # from the scores
    assert m.matrix(np.array([0, 5]), np.array([0, 5])).shape == (6, 6)  # from the ids
    given = Confusion(m.base_trial, category_no="2")
    confusion = given.matrix(np.array([0, 1, 5]), np.array([0, 1, 5]))  # id 5 dropped
    assert confusion is not None and confusion.tolist() == [[1, 0], [0, 1]]


def test_one_hot_labels_nan_samples_and_absent_classes(tmp_path: Path) -> None:
    one_hot = logits([0, 1, 1]) / 5
    preds = logits([0, 1, 0])
    preds[2] = np.nan  # the wrong prediction is NaN: dropped
    root = write(tmp_path, [(0, "TRAIN", 0, {LABELS: one_hot, PREDS: preds})])
    # class 2 has no sample: no row to judge
    assert Confusion(create_trial(str(root))).invoke(0) is Verdict.CONDITION_NOT_MET


def test_modes_missing_steps_one_step_and_mismatched_counts(tmp_path: Path) -> None:
    wrong = [(t + 1) % 3 for t in TRUTH]
    root = write(tmp_path, [
        (0, "TRAIN", 0, {"CrossEntropyLoss_output_0": np.float32(1)}),
        (1, "EVAL", 0, batch(wrong)),
        (2, "TRAIN", 1, {LABELS: np.array([0, 1], np.int64), PREDS: logits([0, 1, 2])}),
    ])
    rule = Confusion(create_trial(str(root)))
    assert [rule.invoke(s) for s in range(3)] == [Verdict.NOT_EVALUATED, Verdict.CONDITION_MET, Verdict.NOT_EVALUATED]
    one = write(tmp_path / "one", [(0, "TRAIN", 0, batch(TRUTH))])
    assert evaluate_trial(str(one), "Confusion", {}).status is Status.NO_ISSUES_FOUND


@pytest.mark.parametrize(("param", "value"), [("category_no", "1"), ("category_no", "three"), ("min_diag", "1.5"),
                                              ("max_off_diag", "x")])
def test_bad_parameters_name_the_parameter(tmp_path: Path, param: str, value: str) -> None:
    root = write(tmp_path, [(0, "TRAIN", 0, batch(TRUTH))])
    with pytest.raises(RuleParameterError, match=param):
        Confusion(create_trial(str(root)), **{param: value})
    status = evaluate_trial(str(root), "Confusion", {param: value, "labels_collection": "labels"})
    assert status.status is Status.ERROR and param in status.status_details


def test_string_parameters_through_the_evaluator(tmp_path: Path) -> None:
    wrong = list(TRUTH)
    wrong[0] = 1
    root = write(tmp_path, [(0, "TRAIN", 0, batch(wrong))])
    assert evaluate_trial(str(root), "Confusion", {}).status is Status.ISSUES_FOUND
    params = {"category_no": "3", "min_diag": "0.75", "max_off_diag": "0.25"}
    assert evaluate_trial(str(root), "Confusion", params).status is Status.NO_ISSUES_FOUND


@pytest.mark.parametrize("trial_name", ["healthy", "healthy_eval", "healthy_relu"])
def test_fixture_trials_without_labels_are_silent(fixture_trials: Path, trial_name: str) -> None:
    # the fixtures save no labels or predictions: not evaluated, no issue, no error
    status = evaluate_trial(str(fixture_trials / trial_name), "Confusion", {})
    assert status.status is Status.NO_ISSUES_FOUND, status.status_details
