"""Confusion: a classifier that confuses classes."""
from __future__ import annotations

from typing import Any

import numpy as np

from evaluator.params import is_none, parse_float, parse_int
from evaluator.rule import Rule, Verdict
from evaluator.rules._select import TensorSelection, value_or_none


def class_ids(value: np.ndarray) -> np.ndarray:
    """Class ids as float64 (NaN for an unusable sample): the argmax of the last axis for scores,
    probabilities or one-hot rows ((samples, classes), classes > 1); else the values rounded to the
    nearest integer (ids, or binary probabilities thresholded at 0.5)."""
    value = np.asarray(value, dtype=np.float64)
    if value.ndim >= 2 and value.shape[-1] > 1:
        rows = value.reshape(-1, value.shape[-1])
        ids = np.argmax(np.nan_to_num(rows, nan=-np.inf), axis=-1).astype(np.float64)
        ids[np.isnan(rows).any(axis=-1)] = np.nan
        return ids
    return np.rint(value.ravel())


class Confusion(Rule):
    """Fires when the step's confusion matrix, normalized per true class, has a diagonal ratio
    confusion[i][i] / Σ_j confusion[i][j] < `min_diag` or an off-diagonal ratio
    confusion[i][j] / Σ_j confusion[i][j] > `max_off_diag` (an identity matrix never fires).

    Labels: the tensor named `labels` if the trial has one, else the `labels_collection` tensors
    saved at the step; predictions likewise (`predictions`, `predictions_collection`); several of
    each are paired in sorted-name order (e.g. `CrossEntropyLoss_input_1` with `..._input_0`).
    Values become class ids by `class_ids` (logits → argmax). `category_no` unset: inferred as the
    largest class id seen + 1 (or the number of scores per sample, if larger).

    Choices: the matrix is built from each step's saved batch alone (a step is one judgement; an
    accumulated matrix would carry the untrained model's first predictions to the end), in any
    mode; samples with a NaN, a negative id or an id >= `category_no` are dropped; a true class
    without samples has no row to judge; a step without labels and predictions, or whose label
    and prediction counts differ, is not evaluated.
    """

    group = "universal"

    def __init__(
        self,
        base_trial: Any,
        category_no: object = None,
        labels: object = "labels",
        predictions: object = "predictions",
        labels_collection: object = "labels",
        predictions_collection: object = "predictions",
        min_diag: object = 0.9,
        max_off_diag: object = 0.1,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, action_str=action_str)
        rule = self.rule_name
        self.category_no = parse_int(rule, "category_no", category_no, minimum=2, allow_none=True)
        self.labels_name = None if is_none(labels) else str(labels).strip()
        self.predictions_name = None if is_none(predictions) else str(predictions).strip()
        self.labels_selection = TensorSelection(rule, labels_collection, None, select_all_if_empty=False)
        self.predictions_selection = TensorSelection(rule, predictions_collection, None, select_all_if_empty=False)
        self.min_diag = float(parse_float(rule, "min_diag", min_diag, minimum=0.0, maximum=1.0))  # type: ignore[arg-type]
        self.max_off_diag = float(parse_float(rule, "max_off_diag", max_off_diag, minimum=0.0, maximum=1.0))  # type: ignore[arg-type]

    def _names(self, exact: str | None, selection: TensorSelection, step: int) -> list[str]:
        if exact and self.base_trial.has_tensor(exact):
            return [exact]
        return selection.names(self.base_trial, step)

    def matrix(self, labels: np.ndarray, predictions: np.ndarray) -> np.ndarray | None:
        """The confusion matrix (rows: true class) of one batch, or None when it cannot be built."""
        truth, guess = class_ids(labels), class_ids(predictions)
        if truth.size == 0 or truth.shape != guess.shape:
            return None
        n = self.category_no
        if n is None:
            known = np.concatenate([truth[~np.isnan(truth)], guess[~np.isnan(guess)]])
            n = int(known.max()) + 1 if known.size else 0
            if predictions.ndim >= 2:
                n = max(n, int(predictions.shape[-1]))
        keep = ~np.isnan(truth) & ~np.isnan(guess)
        keep &= (truth >= 0) & (truth < n) & (guess >= 0) & (guess < n)
        if n < 1 or not keep.any():
            return None
        out = np.zeros((n, n), dtype=np.int64)
        np.add.at(out, (truth[keep].astype(np.int64), guess[keep].astype(np.int64)), 1)
        return out

    def _confused(self, confusion: np.ndarray) -> bool:
        rows = confusion.sum(axis=1)
        for i in np.flatnonzero(rows):
            ratios = confusion[i] / rows[i]
            off = np.delete(ratios, i)
            if ratios[i] < self.min_diag or (off.size and off.max() > self.max_off_diag):
                self.logger.debug("%s: true class %d predicted as %s", self.rule_name, i, ratios.round(3).tolist())
                return True
        return False

    def invoke_at_step(self, step: int) -> Verdict:
        label_names = self._names(self.labels_name, self.labels_selection, step)
        prediction_names = self._names(self.predictions_name, self.predictions_selection, step)
        verdict = Verdict.NOT_EVALUATED
        for lname, pname in zip(label_names, prediction_names, strict=False):
            truth = value_or_none(self.base_trial.tensor(lname), step)
            guess = value_or_none(self.base_trial.tensor(pname), step)
            confusion = None if truth is None or guess is None else self.matrix(truth, guess)
            if confusion is None:
                continue
            if self._confused(confusion):
                return Verdict.CONDITION_MET
            verdict = Verdict.CONDITION_NOT_MET
        return verdict
