"""Overtraining: the training or validation loss stopped improving."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sdlocal.evaluator.params import parse_float, parse_int
from sdlocal.evaluator.rule import DefaultCollection, Rule, Verdict
from sdlocal.evaluator.rules._select import RunningMeans, TensorSelection, is_training, mean_losses
from sdlocal.trial.modes import ModeKeys

# A period (one data point of the loss curve) is at most this many saved steps of one mode.
PERIOD_STEPS = 10


@dataclass
class _Period:
    """The open period of one mode: mean losses per tensor name, and its saved steps."""

    losses: RunningMeans = field(default_factory=RunningMeans)
    steps: int = 0

    def add(self, losses: dict[str, float]) -> None:
        self.steps += 1
        self.losses.add(losses)


@dataclass
class _Curve:
    """Early-stopping bookkeeping of one loss in one mode."""

    best: float | None = None
    wait: int = 0  # periods since the last improvement by >= delta


class Overtraining(Rule):
    """Fires when the training loss has not improved by at least `delta` on its best value for
    `patience_train` periods, or the validation loss for `patience_validation` periods (the
    early-stopping test: a period that is lower than the best by ≥ delta becomes the new best).

    Choices (the docs say "steps"; per-batch losses saved at every step are too noisy for a test
    against an absolute delta, so the unit is a period of steps):
    - A period is a run of consecutive saved steps of one mode, closed by a step of another mode
      (the end of an epoch's training or validation pass) or after 10 saved steps; its data point
      is the mean loss over the period. The verdict is given at the step that closes a period
      (the others are not evaluated); a period still open when training ends is not judged.
    - TRAIN (and GLOBAL, a hook that never set a mode) steps are training, EVAL steps are
      validation; PREDICT steps are ignored.
    - Losses are the `losses` collection; each loss tensor is followed on its own; a NaN loss is
      skipped (ExplodingTensor reports it).
    """

    group = "universal"
    default_collections = (DefaultCollection.of("losses"),)  # sdlocal's

    def __init__(
        self,
        base_trial: Any,
        patience_train: object = 5,
        patience_validation: object = 10,
        delta: object = 0.01,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, action_str=action_str)
        rule = self.rule_name
        self.patience = {
            ModeKeys.TRAIN: int(parse_int(rule, "patience_train", patience_train, minimum=1)),  # type: ignore[arg-type]
            ModeKeys.EVAL: int(parse_int(rule, "patience_validation", patience_validation, minimum=1)),  # type: ignore[arg-type]
        }
        self.delta = float(parse_float(rule, "delta", delta, minimum=0.0))  # type: ignore[arg-type]
        self.selection = TensorSelection(rule, "losses", None, select_all_if_empty=False)
        self._open: dict[ModeKeys, _Period] = {}
        self._curves: dict[tuple[ModeKeys, str], _Curve] = {}

    @staticmethod
    def _phase(mode: Any) -> ModeKeys | None:
        if is_training(mode):
            return ModeKeys.TRAIN
        if mode == ModeKeys.EVAL:
            return ModeKeys.EVAL
        return None

    def _losses(self, step: int) -> dict[str, float]:
        return mean_losses(self.base_trial, self.selection, step)

    def _close(self, phase: ModeKeys, step: int) -> bool | None:
        """Judge the open period of `phase`; True if a loss has not improved for its patience."""
        period = self._open.pop(phase, None)
        if period is None:
            return None
        means = period.losses.means()
        if not means:
            return None
        fired = False
        for name, mean in means.items():
            curve = self._curves.setdefault((phase, name), _Curve())
            if curve.best is None or mean < curve.best - self.delta:
                curve.best, curve.wait = mean, 0
                continue
            curve.wait += 1
            if curve.wait >= self.patience[phase]:
                self.logger.debug("%s: %s %s loss not below %g - %g for %d periods (step %d)",
                                  self.rule_name, phase.name, name, curve.best, self.delta, curve.wait, step)
                fired = True
        return fired

    def invoke_at_step(self, step: int) -> Verdict:
        mode, _ = self.base_trial.mode_modestep(step)
        phase = self._phase(mode)
        if phase is None:
            return Verdict.NOT_EVALUATED
        judged: list[bool] = []
        # a step of the other mode closes that mode's open period
        for other in [p for p in self._open if p is not phase]:
            result = self._close(other, step)
            if result is not None:
                judged.append(result)
        losses = self._losses(step)
        if losses:
            period = self._open.setdefault(phase, _Period())
            period.add(losses)
            if period.steps >= PERIOD_STEPS:
                result = self._close(phase, step)
                if result is not None:
                    judged.append(result)
        if not judged:
            return Verdict.NOT_EVALUATED
        return Verdict.CONDITION_MET if any(judged) else Verdict.CONDITION_NOT_MET
