"""Confusion: a classifier that confuses classes."""
from __future__ import annotations

from typing import Any

import numpy as np

from sdlocal.evaluator.params import is_none, parse_float, parse_int
from sdlocal.evaluator.rule import DefaultCollection, Rule, Verdict
from sdlocal.evaluator.rules._select import TensorSelection, is_training, value_or_none
from sdlocal.trial.modes import ModeKeys

_Counts = dict[tuple[str, str], np.ndarray]  # confusion matrices per (labels, predictions) pair


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


def _add(total: _Counts, counts: _Counts) -> None:
    """Add `counts` into `total`, padding to the larger matrix (an inferred `category_no` can grow)."""
    for key, confusion in counts.items():
        old = total.get(key)
        if old is None:
            total[key] = confusion.copy()
            continue
        n = max(old.shape[0], confusion.shape[0])
        out = np.zeros((n, n), dtype=np.int64)
        out[: old.shape[0], : old.shape[0]] += old
        out[: confusion.shape[0], : confusion.shape[0]] += confusion
        total[key] = out


class Confusion(Rule):
    """Fires when the TRAINED classifier's confusion matrix, normalized per true class, has a
    diagonal ratio confusion[i][i] / Σ_j confusion[i][j] < `min_diag` or an off-diagonal ratio
    confusion[i][j] / Σ_j confusion[i][j] > `max_off_diag` (an identity matrix never fires).

    Labels: the tensor named `labels` if the trial has one, else the `labels_collection` tensors
    saved at the step; predictions likewise (`predictions`, `predictions_collection`); several of
    each are paired in sorted-name order (e.g. `CrossEntropyLoss_input_1` with `..._input_0`), one
    matrix per pair. Values become class ids by `class_ids` (logits → argmax). `category_no`
    unset: inferred as the largest class id seen + 1 (or the number of scores per sample, if
    larger).

    Choices:
    - The rule judges the trained classifier once, at the end of training (`invoke_at_end`, which
      the evaluator loop calls once every step is evaluated; a firing counts at the last evaluated
      step). Judging each step's batch on its own made every run fire at step 0, where the
      untrained model is right by chance only (1/3 for 3 classes), healthy runs included.
    - What is judged: the matrix summed over the final validation pass, i.e. the last maximal run
      of consecutive EVAL steps that have labels and predictions (any other step, or an EVAL step
      without them, ends a pass; so does a jump of the global step larger than the EVAL mode
      step's, which says steps of another mode ran between them even when those were not saved:
      deviation from smdebug, which judges what was saved last, so a job saving EVAL steps but not
      TRAIN ones had every pass, the untrained model's included, judged as one), when the trial has any EVAL labels/predictions; otherwise the
      matrix of the last saved TRAIN (or GLOBAL) step that has them. Validation data is what a
      trained model should classify; an earlier pass (e.g. of the untrained model) does not count.
    - `invoke_at_step` only collects and returns NOT_EVALUATED. Memory stays bounded: the counts
      of the current (or last) validation pass and of the last training step, never every batch.
    - Samples with a NaN, a negative id or an id >= `category_no` are dropped; a true class
      without samples has no row to judge; a step without labels and predictions, or whose label
      and prediction counts differ, adds nothing. A trial with nothing to judge is not evaluated
      (NoIssuesFound).
    """

    group = "universal"
    default_collections = (DefaultCollection.of("labels"), DefaultCollection.of("predictions"))  # sdlocal's

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
        self._pass: _Counts | None = None  # the current (open) or last validation pass
        self._pass_open = False
        self._pass_steps: tuple[int, int] | None = None  # its first and last step
        self._pass_last: tuple[int, int | None] | None = None  # its last (global step, EVAL mode step)
        self._train: _Counts | None = None  # the last TRAIN/GLOBAL step that had labels and predictions
        self._train_step: int | None = None

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

    def _step_counts(self, step: int) -> _Counts:
        """The matrices of one step, per (labels, predictions) pair that gives one."""
        label_names = self._names(self.labels_name, self.labels_selection, step)
        prediction_names = self._names(self.predictions_name, self.predictions_selection, step)
        counts: _Counts = {}
        for lname, pname in zip(label_names, prediction_names, strict=False):
            truth = value_or_none(self.base_trial.tensor(lname), step)
            guess = value_or_none(self.base_trial.tensor(pname), step)
            confusion = None if truth is None or guess is None else self.matrix(truth, guess)
            if confusion is not None:
                counts[(lname, pname)] = confusion
        return counts

    def _continues_pass(self, step: int, mode_step: int | None) -> bool:
        """Whether an EVAL step continues the open pass: no step of another mode ran between them,
        i.e. the global step advanced as much as the EVAL mode step (steps of a mode that was not
        saved still advance the global step)."""
        if not self._pass_open or self._pass is None or self._pass_steps is None or self._pass_last is None:
            return False
        last_step, last_mode_step = self._pass_last
        return mode_step is not None and last_mode_step is not None and step - last_step == mode_step - last_mode_step

    def invoke_at_step(self, step: int) -> Verdict:
        mode, mode_step = self.base_trial.mode_modestep(step)
        counts = self._step_counts(step)
        if mode == ModeKeys.EVAL and counts:
            if not self._continues_pass(step, mode_step):
                self._pass, self._pass_open, self._pass_steps = {}, True, (step, step)
            assert self._pass is not None and self._pass_steps is not None
            self._pass_last = (step, None if mode_step is None else int(mode_step))
            _add(self._pass, counts)
            self._pass_steps = (self._pass_steps[0], step)
            return Verdict.NOT_EVALUATED
        self._pass_open = False  # any other step ends a validation pass
        if counts and is_training(mode):
            self._train, self._train_step = counts, step
        return Verdict.NOT_EVALUATED

    def invoke_at_end(self) -> Verdict:
        """Judge the final validation pass, else the last training step with labels/predictions."""
        if self._pass is not None:
            counts, where = self._pass, f"the validation pass of steps {self._pass_steps}"
        elif self._train is not None:
            counts, where = self._train, f"training step {self._train_step}"
        else:
            return Verdict.NOT_EVALUATED
        for (lname, pname), confusion in counts.items():
            if self._confused(confusion):
                self.logger.info("%s: %s vs %s confused over %s", self.rule_name, lname, pname, where)
                return Verdict.CONDITION_MET
        return Verdict.CONDITION_NOT_MET
