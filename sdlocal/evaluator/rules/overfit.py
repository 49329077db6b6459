"""Overfit: the validation loss runs away from the training loss."""
from __future__ import annotations

import re
from typing import Any

from sdlocal.evaluator.params import parse_float, parse_int
from sdlocal.evaluator.rule import DefaultCollection, Rule, Verdict
from sdlocal.evaluator.rules._select import RunningMeans, TensorSelection, is_training, mean_losses
from sdlocal.trial.modes import ModeKeys

# How many standard deviations of the training losses a validation gap must exceed (see Overfit).
NOISE_STDS = 2.0
# The smallest gap judged, as a fraction of the first training loss seen (see Overfit).
MIN_GAP_OF_FIRST_LOSS = 0.01
# XGBoost metric names: `<data set>-<metric>`; the training set's is `train-<metric>`.
_TRAIN_METRIC = re.compile(r"^(?:train|training)-(.+)$")


class Overfit(Rule):
    """Fires when (mean validation loss − mean training loss) / mean training loss exceeds
    `ratio_threshold` for `patience` consecutive evaluations, and the gap is more than noise.

    Choices:
    - An evaluation is one validation pass: a run of consecutive EVAL steps. It compares the mean
      EVAL loss of the pass with the mean TRAIN (or GLOBAL: a hook that never set a mode) loss of
      the training steps since the previous pass. The pass is judged at each of its EVAL steps on
      its mean so far (so the last pass of a training is judged too, without waiting for a next
      TRAIN step); `patience` counts passes, not EVAL steps.
    - Noise guard: a pass counts as over the threshold only if the ratio exceeds `ratio_threshold`
      AND the gap (mean val − mean train) exceeds `NOISE_STDS` (2) standard deviations (sample,
      n − 1) of the TRAIN losses it is compared with (the training steps since the previous pass).
      A gap within two standard deviations of the training losses is noise, not overfitting: the
      relative ratio of near-zero or noisy losses trips a 0.1 threshold on noise alone. Measured
      on the detection runs (docs/detection-matrix.md), whose training losses are on unseen
      batches: healthy passes reach gaps of up to 1.6 standard deviations (val 0.728 vs train
      0.620, std 0.069, early in a noisy lr=0.5 run; val 0.0202 vs 0.0158 is +28 % yet 0.7 std),
      while the memorizing run's first over-threshold pass is 6.6 and later ones over 60. Two
      standard deviations is the usual line between the two. With fewer than 2 training values
      there is no spread to measure and only the ratio test applies.
    - Scale guard: a gap smaller than `MIN_GAP_OF_FIRST_LOSS` (1 %) of the first training loss the
      rule saw (per loss tensor) is not judged. Far below where training started, both sets are
      fit and the ratio of two near-zero numbers says nothing: a healthy MLP with another seed
      ends at train 1e-4 vs val 4e-3 (ratio 40, gap 0.004 against a first loss of 1.2), while
      the memorizing run's gap is 3.7.
    - Sensitivity: the documented defaults (ratio 0.1, one pass) stay hair-trigger near
      convergence, where a few hard validation samples outweigh tiny training losses: in the
      detection suite's seed sweep (`python -m detection --seeds 6`) it fired on 6 of 18 healthy
      runs; `patience=3` silenced all 18 while the memorizing run still fired.
    - Global steps before `start_step` are ignored.
    - Losses are `tensor_regex` if given, else the `losses` collection; each loss tensor is
      compared with itself across modes. NaN losses are skipped; a training mean of 0 cannot be a
      denominator and is not judged (a negative one is divided by its absolute value).
    - A trial without EVAL steps (or without TRAIN steps before them) is never evaluated, except:
    - XGBoost trials (GLOBAL steps with `train-<metric>` and `<data set>-<metric>` losses, the XGBoost
      hook's names): each saved step compares the validation value with the training value of the
      same metric. Boosting drives the training metric towards 0 while a healthy validation metric
      levels off, so the ratio alone would fire on every long training; a step counts as over the
      threshold only if the ratio exceeds `ratio_threshold` AND the validation metric is above its
      best (lowest) value so far by more than `MIN_GAP_OF_FIRST_LOSS` (1 %) of the first training
      value (it turned up: overfitting, not just a gap; a healthy run's last rounds wobble by
      0.0001-0.0007 of a logloss near 0.52, the overfitting run's climbs from 0.76 to 2.5), and
      `patience` counts such consecutive steps.
    """

    group = "universal"
    default_collections = (DefaultCollection.of("losses"),)  # sdlocal's: the XGBoost hook saves losses only when asked

    def __init__(
        self,
        base_trial: Any,
        tensor_regex: object = None,
        start_step: object = 0,
        patience: object = 1,
        ratio_threshold: object = 0.1,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, action_str=action_str)
        rule = self.rule_name
        selection = TensorSelection(rule, None, tensor_regex, select_all_if_empty=False)
        self.selection = selection if not selection.empty else TensorSelection(rule, "losses", None, select_all_if_empty=False)
        self.start_step = int(parse_int(rule, "start_step", start_step, minimum=0))  # type: ignore[arg-type]
        self.patience = int(parse_int(rule, "patience", patience, minimum=1))  # type: ignore[arg-type]
        self.ratio_threshold = float(parse_float(rule, "ratio_threshold", ratio_threshold))  # type: ignore[arg-type]
        self._train = RunningMeans()  # training steps since the previous validation pass
        self._val: RunningMeans | None = None  # the open validation pass
        self._train_for_pass: RunningMeans | None = None  # the training steps that pass is compared with
        self._first_train: dict[str, float] = {}  # the first training loss seen, per loss tensor
        self._streak = 0  # consecutive passes over the threshold, before the open one
        self._open_over = False  # the open pass is over the threshold (so far)
        self._open_judged = False  # the open pass had something to compare
        self._best_val: dict[str, float] = {}  # XGBoost: each validation metric's lowest value so far
        self._rising = 0  # XGBoost: consecutive steps over the threshold

    def _losses(self, step: int) -> dict[str, float]:
        return mean_losses(self.base_trial, self.selection, step)

    def _close_pass(self) -> None:
        if self._val is not None and self._open_judged:
            self._streak = self._streak + 1 if self._open_over else 0
        self._val, self._train_for_pass = None, None
        self._open_over = self._open_judged = False

    def _ratios(self) -> dict[str, tuple[float, float, float | None]]:
        """Per loss: (ratio, gap, training spread or None) of the open pass so far."""
        assert self._val is not None and self._train_for_pass is not None
        ratios: dict[str, tuple[float, float, float | None]] = {}
        for name in self._val.sums:
            val, train = self._val.mean(name), self._train_for_pass.mean(name)
            if val is None or train is None or train == 0.0:
                continue
            ratios[name] = ((val - train) / abs(train), val - train, self._train_for_pass.std(name))
        return ratios

    def _over(self, name: str, ratio: float, gap: float, spread: float | None) -> bool:
        first = self._first_train.get(name)
        if first is not None and gap < MIN_GAP_OF_FIRST_LOSS * abs(first):
            return False
        return ratio > self.ratio_threshold and (spread is None or gap > NOISE_STDS * spread)

    def invoke_at_step(self, step: int) -> Verdict:
        if step < self.start_step:
            return Verdict.NOT_EVALUATED
        mode, _ = self.base_trial.mode_modestep(step)
        if mode == ModeKeys.GLOBAL:
            pairs = self._metric_pairs(self._losses(step))
            if pairs:
                return self._judge_pairs(step, pairs)
        if is_training(mode):
            if self._val is not None:  # a validation pass just ended
                self._close_pass()
                self._train = RunningMeans()
            losses = self._losses(step)
            for name, loss in losses.items():
                self._first_train.setdefault(name, loss)
            self._train.add(losses)
            return Verdict.NOT_EVALUATED
        if mode != ModeKeys.EVAL:
            return Verdict.NOT_EVALUATED
        losses = self._losses(step)
        if self._val is None:
            if not losses:
                return Verdict.NOT_EVALUATED
            self._val, self._train_for_pass = RunningMeans(), self._train
        self._val.add(losses)
        ratios = self._ratios()
        if not ratios:
            return Verdict.NOT_EVALUATED
        self._open_judged = True
        self._open_over = any(self._over(name, *r) for name, r in ratios.items())
        streak = self._streak + 1 if self._open_over else 0
        if streak >= self.patience:
            self.logger.debug("%s: (ratio, gap, training spread) per loss %s at step %d (%d passes)",
                              self.rule_name, ratios, step, streak)
            return Verdict.CONDITION_MET
        return Verdict.CONDITION_NOT_MET

    @staticmethod
    def _metric_pairs(losses: dict[str, float]) -> dict[str, tuple[float, float]]:
        """XGBoost: validation metric name -> (training value, validation value)."""
        pairs: dict[str, tuple[float, float]] = {}
        for name, train in losses.items():
            m = _TRAIN_METRIC.match(name)
            if m is None:
                continue
            for other, val in losses.items():
                if other != name and other.endswith("-" + m.group(1)) and not _TRAIN_METRIC.match(other):
                    pairs[other] = (train, val)
        return pairs

    def _judge_pairs(self, step: int, pairs: dict[str, tuple[float, float]]) -> Verdict:
        over = []
        for name, (train, val) in pairs.items():
            best = self._best_val.get(name)
            self._best_val[name] = val if best is None else min(best, val)
            first = self._first_train.setdefault(name, train)
            if best is None or train == 0.0:
                continue
            ratio, gap = (val - train) / abs(train), val - train
            turned_up = val - best > MIN_GAP_OF_FIRST_LOSS * abs(first)
            if turned_up and self._over(name, ratio, gap, None):
                over.append((name, round(ratio, 3)))
        self._rising = self._rising + 1 if over else 0
        if self._rising >= self.patience:
            self.logger.debug("%s: validation metrics rising above training %s at step %d (%d steps)",
                              self.rule_name, over, step, self._rising)
            return Verdict.CONDITION_MET
        return Verdict.CONDITION_NOT_MET
