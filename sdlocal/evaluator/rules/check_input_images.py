"""CheckInputImages: input images that were not normalized."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sdlocal.evaluator.params import parse_float, parse_int
from sdlocal.evaluator.rule import DefaultCollection, Rule, Verdict
from sdlocal.evaluator.rules._select import TensorSelection, value_or_none


@dataclass
class _Running:
    images: int = 0
    sums: np.ndarray = field(default_factory=lambda: np.zeros(0))
    counts: np.ndarray = field(default_factory=lambda: np.zeros(0))
    steps: set[int] = field(default_factory=set)
    low: float = float("inf")  # the smallest and largest value seen
    high: float = float("-inf")


class CheckInputImages(Rule):
    """Fires when, once `threshold_samples` images have been seen, |mean| of an input channel
    > `threshold_mean` (normalized inputs have zero mean per channel).

    Inputs: the `input_image` collection (`collection_names`) ∪ the tensors matching `regex`.
    The first axis is the images, axis `channel` the color channel (1: NCHW, 3: NHWC); the mean
    of a channel is over every value of that channel of every image seen so far in that tensor.

    Deviation from smdebug: images whose values all lie in [-1, 1], some of them below 0, are
    normalized: scaling [0, 1] pixels to [-1, 1] (`Normalize((0.5,), (0.5,))`, a GAN's tanh range,
    many pretrained vision models) is a standard normalization whose channel means are far from 0
    on most data sets (MNIST: -0.74), and the rule exists to find inputs left unnormalized
    (0-255 pixels, [0, 1] values: those still fire).

    Choices: images accumulate over the saved steps of every mode (each step counted once); a
    step before `threshold_samples` images is not evaluated; NaN values are left out of the
    means; a tensor without the `channel` axis, or whose channel count changes, is not judged.
    """

    group = "DL applications"
    default_collections = (
        DefaultCollection.of("input_image", {"include_regex": ".*hybridsequential0_input_0", "save_interval": "500"}),
    )

    def __init__(
        self,
        base_trial: Any,
        threshold_mean: object = 0.2,
        threshold_samples: object = 500,
        regex: object = ".*hybridsequential0_input_0",
        channel: object = 1,
        collection_names: object = "input_image",
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, action_str=action_str)
        rule = self.rule_name
        self.threshold_mean = float(parse_float(rule, "threshold_mean", threshold_mean, minimum=0.0))  # type: ignore[arg-type]
        self.threshold_samples = int(parse_int(rule, "threshold_samples", threshold_samples, minimum=1))  # type: ignore[arg-type]
        self.channel = int(parse_int(rule, "channel", channel, minimum=1))  # type: ignore[arg-type]
        self.selection = TensorSelection(rule, collection_names, regex, select_all_if_empty=False, regex_param="regex")
        self._running: dict[str, _Running] = {}

    def _add(self, name: str, step: int, value: np.ndarray) -> _Running | None:
        running = self._running.setdefault(name, _Running())
        if step in running.steps:
            return running
        if value.ndim <= self.channel or value.shape[0] == 0:
            self.logger.debug("%s: %s of shape %s has no axis %d", self.rule_name, name, value.shape, self.channel)
            return None
        per_channel = np.moveaxis(value.astype(np.float64), self.channel, 0).reshape(value.shape[self.channel], -1)
        if running.images and per_channel.shape[0] != running.sums.size:
            return None
        valid = ~np.isnan(per_channel)
        sums = np.where(valid, per_channel, 0.0).sum(axis=1)
        counts = valid.sum(axis=1)
        running.sums = sums if not running.images else running.sums + sums
        running.counts = counts if not running.images else running.counts + counts
        running.images += value.shape[0]
        finite = per_channel[np.isfinite(per_channel)]
        if finite.size:
            running.low, running.high = min(running.low, float(finite.min())), max(running.high, float(finite.max()))
        running.steps.add(step)
        return running

    def invoke_at_step(self, step: int) -> Verdict:
        verdict = Verdict.NOT_EVALUATED
        fired = False
        for name in self.selection.names(self.base_trial, step):
            value = value_or_none(self.base_trial.tensor(name), step)
            running = None if value is None else self._add(name, step, value)
            if running is None or running.images < self.threshold_samples or not running.counts.any():
                continue
            judged = running.counts > 0
            means = running.sums[judged] / running.counts[judged]
            verdict = Verdict.CONDITION_NOT_MET
            if -1.0 <= running.low < 0.0 and running.high <= 1.0:
                continue  # the [-1, 1] range: normalized
            if float(np.max(np.abs(means))) > self.threshold_mean:
                self.logger.debug("%s: channel means of %s = %s after %d images", self.rule_name, name, means.round(3).tolist(), running.images)
                fired = True
        return Verdict.CONDITION_MET if fired else verdict
