"""Confusion on written trials and on the smdebug fixtures."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sdlocal.evaluator.api import evaluate_trial
from sdlocal.evaluator.errors import RuleParameterError
from sdlocal.evaluator.loop import evaluate
from sdlocal.evaluator.rule import Verdict
from sdlocal.evaluator.rules import Confusion
from sdlocal.evaluator.status import RuleStatus, Status
from sdlocal.trial import Collection, TrialWriter, create_trial
from tests.evaluator._trials import COLLECTIONS, judged_nothing, make_trial

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


def judge(root: Path, **params: str) -> RuleStatus:
    """The rule through the evaluator (invoke_at_end is the loop's): the final status."""
    return evaluate_trial(str(root), "Confusion", params)


def fired_at(status: RuleStatus) -> int | None:
    assert status.status in (Status.ISSUES_FOUND, Status.NO_ISSUES_FOUND), status.status_details
    if status.status is Status.NO_ISSUES_FOUND:
        return None
    return int(status.status_details.split(" at step ")[1].split()[0])


ONE_WRONG = [1, *TRUTH[1:]]  # class 0: 80 % on the diagonal, 20 % predicted as 1
WRONG = [(t + 1) % 3 for t in TRUTH]


def test_identity_is_silent_and_confusion_fires(tmp_path: Path) -> None:
    assert fired_at(judge(write(tmp_path / "id", [(0, "TRAIN", 0, batch(TRUTH))]))) is None
    root = write(tmp_path / "c", [(0, "TRAIN", 0, batch(TRUTH)), (1, "TRAIN", 1, batch(ONE_WRONG))])
    assert fired_at(judge(root)) == 1  # judged once, at the end: the last evaluated step
    assert fired_at(judge(root, min_diag="0.8", max_off_diag="0.2")) is None
    assert fired_at(judge(root, min_diag="0.8")) == 1  # off-diagonal 0.2


def test_invoke_at_step_only_collects(tmp_path: Path) -> None:
    root = write(tmp_path, [(0, "TRAIN", 0, batch(WRONG)), (1, "EVAL", 0, batch(WRONG))])
    rule = Confusion(create_trial(str(root)))
    assert [rule.judge_step(s) for s in (0, 1)] == [Verdict.NOT_EVALUATED, Verdict.NOT_EVALUATED]
    assert rule.invoke_at_end() is Verdict.CONDITION_MET
    assert Confusion(create_trial(str(root))).invoke_at_end() is Verdict.NOT_EVALUATED  # nothing collected


def test_train_only_trial_is_judged_on_its_last_step(tmp_path: Path) -> None:
    # the untrained model's confused batches at steps 0-1 do not count; the trained one at step 3 does
    healthy = write(tmp_path / "h", [(0, "TRAIN", 0, batch(WRONG)), (1, "TRAIN", 1, batch(ONE_WRONG)),
                                     (2, "TRAIN", 2, batch(TRUTH)), (3, "TRAIN", 3, batch(TRUTH)),
                                     (4, "TRAIN", 4, {"CrossEntropyLoss_output_0": np.float32(0.1)})])
    assert fired_at(judge(healthy)) is None  # step 4 has no labels: step 3 is the last that has them
    broken = write(tmp_path / "b", [(0, "GLOBAL", 0, batch(TRUTH)), (1, "GLOBAL", 1, batch(ONE_WRONG))])
    assert fired_at(judge(broken)) == 1


def test_the_eval_pass_is_preferred_over_training(tmp_path: Path) -> None:
    good_train = write(tmp_path / "a", [(0, "TRAIN", 0, batch(TRUTH)), (1, "EVAL", 0, batch(WRONG)),
                                        (2, "TRAIN", 1, batch(TRUTH))])
    assert fired_at(judge(good_train)) == 2  # the validation pass is confused
    bad_train = write(tmp_path / "b", [(0, "TRAIN", 0, batch(WRONG)), (1, "EVAL", 0, batch(TRUTH)),
                                       (2, "TRAIN", 1, batch(WRONG))])
    assert fired_at(judge(bad_train)) is None


def test_only_the_final_validation_pass_counts(tmp_path: Path) -> None:
    early_bad = write(tmp_path / "a", [(0, "EVAL", 0, batch(WRONG)), (1, "EVAL", 1, batch(WRONG)),
                                       (2, "TRAIN", 0, batch(TRUTH)),
                                       (3, "EVAL", 2, batch(TRUTH)), (4, "EVAL", 3, batch(TRUTH))])
    assert fired_at(judge(early_bad)) is None
    late_bad = write(tmp_path / "b", [(0, "EVAL", 0, batch(TRUTH)), (1, "TRAIN", 0, batch(TRUTH)),
                                      (2, "EVAL", 1, batch(TRUTH)), (3, "EVAL", 2, batch(WRONG)),
                                      (4, "TRAIN", 1, batch(TRUTH))])
    assert fired_at(judge(late_bad)) == 4


def test_a_pass_is_judged_on_its_summed_matrix(tmp_path: Path) -> None:
    # one batch alone: class 0 at 80 %; the pass of two batches: 90 % and 10 % (not past the limits)
    root = write(tmp_path, [(0, "EVAL", 0, batch(ONE_WRONG)), (1, "EVAL", 1, batch(TRUTH))])
    assert fired_at(judge(root)) is None
    assert fired_at(judge(write(tmp_path / "one", [(0, "EVAL", 0, batch(ONE_WRONG))]))) == 0


def test_an_eval_step_without_labels_ends_a_pass(tmp_path: Path) -> None:
    loss = {"CrossEntropyLoss_output_0": np.float32(1)}
    root = write(tmp_path, [(0, "EVAL", 0, batch(WRONG)), (1, "EVAL", 1, loss), (2, "EVAL", 2, batch(TRUTH))])
    assert fired_at(judge(root)) is None  # the final pass is step 2 alone


def test_inferred_category_no_grows_within_a_pass(tmp_path: Path) -> None:
    ids = np.array([0, 1, 0, 1], np.int64)
    later = np.array([0, 1, 2, 2], np.int64)
    guess = np.array([0, 1, 2, 0], np.float32)  # class 2: one of two wrong
    trial = make_trial(tmp_path, [(0, "EVAL", 0, {"labels": ids, "predictions": ids.astype(np.float32)}),
                                  (1, "EVAL", 1, {"labels": later, "predictions": guess})])
    status = evaluate(trial, Confusion(trial), sleep=lambda s: None)
    assert fired_at(status) == 1


def test_labels_and_predictions_by_tensor_name_and_class_ids(tmp_path: Path) -> None:
    truth = np.array([0, 1, 2, 3], np.int64)
    exact = make_trial(tmp_path / "a", [(0, "TRAIN", 0, {"labels": truth, "predictions": truth.astype(np.float32)})])
    assert evaluate(exact, Confusion(exact), sleep=lambda s: None).status is Status.NO_ISSUES_FOUND
    off = make_trial(tmp_path / "b", [(0, "TRAIN", 0, {"labels": truth, "predictions": np.array([0, 1, 2, 2], np.float32)})])
    # no collections: the tensors named "labels" / "predictions"
    assert evaluate(off, Confusion(off), sleep=lambda s: None).status is Status.ISSUES_FOUND
    rule = Confusion(off, labels="none", predictions="none")
    assert rule.judge_step(0) is Verdict.NOT_EVALUATED and rule.invoke_at_end() is Verdict.NOT_EVALUATED


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
    assert fired_at(judge(root)) is None
    preds[2] = logits([0])[0]
    assert fired_at(judge(write(tmp_path / "kept", [(0, "TRAIN", 0, {LABELS: one_hot, PREDS: preds})]))) == 0


def test_missing_steps_and_mismatched_counts_add_nothing(tmp_path: Path) -> None:
    root = write(tmp_path, [
        (0, "TRAIN", 0, {"CrossEntropyLoss_output_0": np.float32(1)}),
        (1, "TRAIN", 1, batch(WRONG)),
        (2, "TRAIN", 2, {LABELS: np.array([0, 1], np.int64), PREDS: logits([0, 1, 2])}),
    ])
    assert fired_at(judge(root)) == 2  # step 1 is the last step with a matrix; fired at the last step
    only_bad = write(tmp_path / "m", [(0, "TRAIN", 0, {LABELS: np.array([0, 1], np.int64), PREDS: logits([1, 0, 2])})])
    assert judge(only_bad).status is Status.NO_ISSUES_FOUND  # not evaluated


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
def test_fixture_trials_without_labels_judged_nothing(fixture_trials: Path, trial_name: str) -> None:
    # the fixtures save no labels or predictions: the rule judged nothing, and says so
    status = evaluate_trial(str(fixture_trials / trial_name), "Confusion", {})
    assert judged_nothing(status), status.status_details  # no verdict without data


def test_passes_split_where_unsaved_training_steps_ran_between_them(tmp_path: Path) -> None:
    """A job saving labels/predictions at EVAL steps only: the TRAIN steps between two passes are
    not in the trial, yet the global step jumped; the latest pass alone is judged (before: the
    untrained model's first pass was summed into it and the healthy run fired)."""
    early_bad = write(tmp_path / "a", [(5, "EVAL", 0, batch(WRONG)), (6, "EVAL", 1, batch(WRONG)),
                                       (12, "EVAL", 2, batch(TRUTH)), (13, "EVAL", 3, batch(TRUTH))])
    assert fired_at(judge(early_bad)) is None
    late_bad = write(tmp_path / "b", [(5, "EVAL", 0, batch(TRUTH)), (6, "EVAL", 1, batch(TRUTH)),
                                      (12, "EVAL", 2, batch(WRONG)), (13, "EVAL", 3, batch(TRUTH))])
    assert fired_at(judge(late_bad)) == 13
    # a pass saved every other step (eval.save_interval=2) stays one pass
    sparse = write(tmp_path / "c", [(5, "EVAL", 0, batch(ONE_WRONG)), (7, "EVAL", 2, batch(TRUTH))])
    assert fired_at(judge(sparse)) is None  # summed: 90 % on the diagonal
