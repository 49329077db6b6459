"""ClassImbalance: imbalanced labels, or a class the model keeps getting wrong."""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sdlocal.evaluator.errors import RuleParameterError
from sdlocal.evaluator.params import parse_bool, parse_float, parse_int
from sdlocal.evaluator.rule import DefaultCollection, Rule, Verdict
from sdlocal.evaluator.rules._select import REDUCTION_PREFIX, is_training, value_or_none
from sdlocal.trial.modes import ModeKeys

# A class with fewer samples than this in the window is not judged for mispredictions.
MIN_CLASS_SAMPLES = 10


@dataclass
class _ModeState:
    label_counts: Counter[int] = field(default_factory=Counter)
    labels_seen: int = 0
    pairs_seen: int = 0
    window: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)  # (labels, predictions) per step
    window_size: int = 0


class ClassImbalance(Rule):
    """Fires when, after `samples` labels, the most frequent class has more than
    `threshold_imbalance` times the samples of the least frequent one, or a class is mispredicted
    in more than `threshold_misprediction` of its samples.

    Labels are the tensors matching `labels_regex`, predictions those matching
    `predictions_regex` (the hook saves `<Loss>_labels` and `<Loss>_predictions`, class ids).
    Choices:
    - Labels are class ids (floats are rounded). Predictions are class ids unless `argmax=True`
      (scores: `numpy.argmax` over the last axis); predictions with one more dimension than
      the labels are scores even with `argmax=False`. A single value per sample (shape (N,) or
      (N, 1)) is never argmax'd: it is an id, or a binary probability rounded at 0.5. Several label/prediction tensors are
      paired in name order; a pair whose sizes differ is only counted as labels. NaN entries are
      dropped.
    - Each mode has its own counts (GLOBAL steps count as TRAIN): imbalance uses every label
      seen so far (a property of the data set); mispredictions use the most recent `samples`
      pairs (whole steps), once `2 × samples` pairs have been seen (the first `samples` are the
      untrained model's), and only for classes with at least 10 samples in that window — a
      model that is still learning, or a handful of samples, is not a misprediction problem.
    - A class that never occurred is unknown, not a zero count. Steps before `samples` labels,
      or without labels, are not evaluated.
    """

    group = "universal"
    default_collections = (DefaultCollection.of("labels"), DefaultCollection.of("predictions"))  # sdlocal's

    def __init__(
        self,
        base_trial: Any,
        threshold_imbalance: object = 10,
        threshold_misprediction: object = 0.7,
        samples: object = 500,
        argmax: object = False,
        labels_regex: object = ".*labels",
        predictions_regex: object = ".*predictions",
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, action_str=action_str)
        rule = self.rule_name
        self.threshold_imbalance = float(parse_float(rule, "threshold_imbalance", threshold_imbalance, minimum=1.0))  # type: ignore[arg-type]
        self.threshold_misprediction = float(
            parse_float(rule, "threshold_misprediction", threshold_misprediction, minimum=0.0, maximum=1.0)  # type: ignore[arg-type]
        )
        self.samples = int(parse_int(rule, "samples", samples, minimum=1))  # type: ignore[arg-type]
        self.argmax = parse_bool(rule, "argmax", argmax)
        self.labels_regex = self._regex("labels_regex", labels_regex)
        self.predictions_regex = self._regex("predictions_regex", predictions_regex)
        self._state: dict[ModeKeys, _ModeState] = {}

    def _regex(self, name: str, value: object) -> re.Pattern[str]:
        if not isinstance(value, str) or not value.strip():
            raise RuleParameterError(self.rule_name, name, value, "expected a regular expression")
        try:
            return re.compile(value.strip())
        except re.error as exc:
            raise RuleParameterError(self.rule_name, name, value, f"not a regular expression ({exc})") from None

    def _values(self, regex: re.Pattern[str], step: int) -> list[np.ndarray]:
        names = [n for n in self.base_trial.tensor_names(step=step) if regex.search(n) and not n.startswith(REDUCTION_PREFIX)]
        out = []
        for name in sorted(names):
            value = value_or_none(self.base_trial.tensor(name), step)
            if value is not None and value.size:
                out.append(value)
        return out

    def _predicted_ids(self, predictions: np.ndarray, labels: np.ndarray) -> np.ndarray:
        scores = predictions.astype(np.float64)
        # scores: one row per sample with a score per class; a single value per sample is already
        # an id (or a binary probability, rounded below) whatever `argmax` says
        if (self.argmax or scores.ndim == labels.ndim + 1) and scores.ndim >= 2 and scores.shape[-1] > 1:
            ids = np.atleast_1d(np.argmax(scores, axis=-1)).astype(np.float64)
            ids[np.atleast_1d(np.isnan(scores).any(axis=-1))] = np.nan
            return ids.ravel()
        return scores.ravel()

    def _read_step(self, step: int) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
        """All labels of the step (class ids) and the (labels, predictions) pairs."""
        labels_list = self._values(self.labels_regex, step)
        predictions_list = self._values(self.predictions_regex, step)
        all_labels: list[np.ndarray] = []
        pairs: list[tuple[np.ndarray, np.ndarray]] = []
        for i, labels in enumerate(labels_list):
            flat = labels.astype(np.float64).ravel()
            all_labels.append(flat[~np.isnan(flat)])
            if i < len(predictions_list):
                predicted = self._predicted_ids(predictions_list[i], labels)
                if predicted.size == flat.size:
                    keep = ~(np.isnan(flat) | np.isnan(predicted))
                    pairs.append((np.rint(flat[keep]).astype(np.int64), np.rint(predicted[keep]).astype(np.int64)))
        labels_ids = np.rint(np.concatenate(all_labels)).astype(np.int64) if all_labels else np.zeros(0, np.int64)
        return labels_ids, pairs

    def _update(self, state: _ModeState, labels: np.ndarray, pairs: list[tuple[np.ndarray, np.ndarray]]) -> None:
        state.label_counts.update(labels.tolist())
        state.labels_seen += labels.size
        for pair in pairs:
            state.window.append(pair)
            state.window_size += pair[0].size
            state.pairs_seen += pair[0].size
        while state.window and state.window_size - state.window[0][0].size >= self.samples:
            state.window_size -= state.window.pop(0)[0].size

    def _imbalanced(self, state: _ModeState) -> bool:
        counts = [c for c in state.label_counts.values() if c > 0]
        if len(counts) < 2:
            return False
        return max(counts) / min(counts) > self.threshold_imbalance

    def _mispredicted(self, state: _ModeState) -> list[int]:
        if state.pairs_seen < 2 * self.samples or not state.window:
            return []
        labels = np.concatenate([p[0] for p in state.window])
        predictions = np.concatenate([p[1] for p in state.window])
        bad = []
        for cls in np.unique(labels):
            mask = labels == cls
            n = int(mask.sum())
            if n >= MIN_CLASS_SAMPLES and float(np.mean(predictions[mask] != cls)) > self.threshold_misprediction:
                bad.append(int(cls))
        return bad

    def invoke_at_step(self, step: int) -> Verdict:
        mode, _ = self.base_trial.mode_modestep(step)
        key = ModeKeys.TRAIN if is_training(mode) else ModeKeys(mode)
        labels, pairs = self._read_step(step)
        if not labels.size:
            return Verdict.NOT_EVALUATED
        state = self._state.setdefault(key, _ModeState())
        self._update(state, labels, pairs)
        if state.labels_seen < self.samples:
            return Verdict.NOT_EVALUATED
        fired = False
        if self._imbalanced(state):
            self.logger.debug("%s: class counts %s at step %d", self.rule_name, dict(state.label_counts), step)
            fired = True
        bad = self._mispredicted(state)
        if bad:
            self.logger.debug("%s: classes %s mispredicted at step %d", self.rule_name, bad, step)
            fired = True
        return Verdict.CONDITION_MET if fired else Verdict.CONDITION_NOT_MET
