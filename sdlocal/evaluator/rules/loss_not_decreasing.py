"""LossNotDecreasing: the loss stopped going down."""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from sdlocal.evaluator.errors import RuleParameterError
from sdlocal.evaluator.params import parse_bool, parse_float, parse_int, parse_mode
from sdlocal.evaluator.rule import DefaultCollection, Rule, Verdict
from sdlocal.evaluator.rules._select import TensorSelection, mean_losses
from sdlocal.trial.modes import ModeKeys


@dataclass
class _ModeState:
    baseline_step: int | None = None  # mode step of the last evaluation point
    baseline: dict[str, list[float]] = field(default_factory=dict)  # window values at the last evaluation point
    minimum: dict[str, float] = field(default_factory=dict)
    recent: deque[tuple[int, dict[str, float]]] = field(default_factory=deque)  # (mode step, losses)


class LossNotDecreasing(Rule):
    """Fires when a loss has not decreased enough over `num_steps` steps.

    The first step with a loss is the baseline. The rule is evaluated at the first step at least
    `num_steps` (mode) steps after the baseline, which then becomes the new baseline; it fires if
    a loss is not lower than at the baseline by `diff_percent` % of the baseline, or if it exceeds
    the lowest loss seen at evaluation points by more than `increase_threshold_percent` %.
    Example: losses 0.3, 0.33, 0.31, 0.30, 0.28 at steps 0, 4, 8, 12, 16 with num_steps=10 fire
    at step 12 (0.30 vs 0.3 at step 0). Steps in between are not evaluated.

    Deviation from smdebug, which compares the single losses of two steps: the loss at an
    evaluation point s is the mean of the last k losses saved in the window (s − num_steps, s],
    the baseline's the mean of its last k, k the smaller count of the two windows (the first
    baseline has one loss: that first comparison is smdebug's; two windows of equal length carry
    equal noise, and a periodic loss — an evaluation pass's batches — compares like with like);
    the lowest loss is the lowest such mean. A per-batch loss is
    noisy (a language model's by tenths, batch to batch) and two single steps fired on healthy
    runs whose trend goes down; a mean over num_steps steps cuts that noise by √num_steps, and a
    flat loss, noisy or not, still fires. With one saved loss per window (saved every `num_steps`
    steps or more) this is smdebug's comparison; the example above gives the same verdicts.
    GAN adversarial losses: a generator's and a discriminator's losses oppose each other and settle,
    they are not expected to decrease; the rule on them reports that faithfully (documented in
    README's rules section; the recommended set leaves this rule out for that reason).

    Losses are the `losses` collection (unless `use_losses_collection=False`) ∪ `collection_names`
    ∪ `tensor_regex`; a non-scalar loss is averaged. Mode: `mode` if given, else EVAL while the
    trial has EVAL steps, else TRAIN, else GLOBAL; steps of other modes are not evaluated, and
    each mode keeps its own baseline (a live trial may gain EVAL steps later). Choice: a NaN
    loss is skipped (ExplodingTensor reports it).
    """

    group = "universal"
    default_collections = (DefaultCollection.of("losses", {"save_interval": "500"}),)

    def __init__(
        self,
        base_trial: Any,
        collection_names: object = None,
        tensor_regex: object = None,
        use_losses_collection: object = True,
        num_steps: object = 10,
        diff_percent: object = 0.1,
        increase_threshold_percent: object = 5,
        mode: object = None,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, action_str=action_str)
        rule = self.rule_name
        self.use_losses_collection = parse_bool(rule, "use_losses_collection", use_losses_collection)
        names = TensorSelection(rule, collection_names, tensor_regex).collections
        if self.use_losses_collection and "losses" not in names:
            names = (*names, "losses")
        self.selection = TensorSelection(rule, ",".join(names), tensor_regex, select_all_if_empty=False)
        if self.selection.empty:
            raise RuleParameterError(
                rule,
                "use_losses_collection",
                use_losses_collection,
                "no losses to inspect: set collection_names or tensor_regex, or use_losses_collection=True",
            )
        self.num_steps = int(parse_int(rule, "num_steps", num_steps, minimum=1))  # type: ignore[arg-type]
        self.diff_percent = float(parse_float(rule, "diff_percent", diff_percent, minimum=0.0, maximum=100.0))  # type: ignore[arg-type]
        self.increase_threshold_percent = float(
            parse_float(rule, "increase_threshold_percent", increase_threshold_percent, minimum=0.0)  # type: ignore[arg-type]
        )
        self.mode = parse_mode(rule, "mode", mode)
        self._state: dict[ModeKeys, _ModeState] = {}

    def _target_mode(self) -> ModeKeys:
        if self.mode is not None:
            return self.mode
        modes = set(self.base_trial.modes())
        for candidate in (ModeKeys.EVAL, ModeKeys.TRAIN):
            if candidate in modes:
                return candidate
        return ModeKeys.GLOBAL

    def _losses(self, step: int) -> dict[str, float]:
        return mean_losses(self.base_trial, self.selection, step)

    def _windows(self, state: _ModeState) -> dict[str, list[float]]:
        """The values of each loss over the steps of the window kept in `state.recent`, oldest first."""
        values: dict[str, list[float]] = {}
        for _, losses in state.recent:
            for name, loss in losses.items():
                values.setdefault(name, []).append(loss)
        return values

    def invoke_at_step(self, step: int) -> Verdict:
        mode, mode_step = self.base_trial.mode_modestep(step)
        target = self._target_mode()
        if target is not ModeKeys.GLOBAL and mode != target:
            return Verdict.NOT_EVALUATED
        if target is ModeKeys.GLOBAL:
            mode_step = step
        state = self._state.setdefault(target, _ModeState())
        losses = self._losses(step)
        if losses:
            state.recent.append((mode_step, losses))
        while state.recent and state.recent[0][0] <= mode_step - self.num_steps:
            state.recent.popleft()
        if state.baseline_step is not None and mode_step - state.baseline_step < self.num_steps:
            return Verdict.NOT_EVALUATED
        if not losses:
            return Verdict.NOT_EVALUATED
        windows = self._windows(state)
        fired = False
        means: dict[str, float] = {}
        for name, values in windows.items():
            before = state.baseline.get(name) if state.baseline_step is not None else None
            k = min(len(values), len(before)) if before else len(values)  # equal windows: equal noise
            loss = means[name] = sum(values[-k:]) / k
            lowest = state.minimum.get(name)
            if before:
                prev = sum(before[-k:]) / k
                if (prev - loss) < abs(prev) * self.diff_percent / 100.0:
                    self.logger.debug("%s: %s mean %g of %d steps up to step %d vs %g at mode step %d",
                                      self.rule_name, name, loss, k, step, prev, state.baseline_step)
                    fired = True
            if lowest is not None and loss - lowest > abs(lowest) * self.increase_threshold_percent / 100.0:
                self.logger.debug("%s: %s rose to %g (lowest %g)", self.rule_name, name, loss, lowest)
                fired = True
        state.baseline_step = mode_step
        state.baseline.update(windows)
        for name, loss in means.items():
            state.minimum[name] = min(loss, state.minimum.get(name, loss))
        return Verdict.CONDITION_MET if fired else Verdict.CONDITION_NOT_MET
