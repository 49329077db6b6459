"""Shared by DeadRelu and SaturatedActivation: the share of a layer's units that are (almost)
never active, where "active" is the rule's own test of a sample's value."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from sdlocal.evaluator.rules._select import value_or_none


def as_samples_by_units(value: np.ndarray) -> np.ndarray | None:
    """The value as (samples, units): the first axis is the samples, every other position is one
    unit (a neuron of a dense layer, one (channel, y, x) position of a convolution). A 1-D tensor is
    one unit; a scalar or an empty tensor has no samples (None)."""
    if value.ndim == 0 or value.size == 0:
        return None
    return value.reshape(value.shape[0], -1)


def percent_inactive_units(value: np.ndarray, active: np.ndarray, threshold_inactivity: float) -> float | None:
    """% of the units active in fewer than `threshold_inactivity` % of the samples.

    `value` and `active` are (samples, units); a NaN sample of a unit counts neither as active nor
    as a sample of that unit, and a unit with only NaN samples is left out. None: no unit left."""
    valid = ~np.isnan(value) if np.issubdtype(value.dtype, np.floating) else np.ones(value.shape, dtype=bool)
    samples = valid.sum(axis=0)
    judged = samples > 0
    if not judged.any():
        return None
    activity = 100.0 * (active & valid).sum(axis=0)[judged] / samples[judged]
    return 100.0 * float(np.count_nonzero(activity < threshold_inactivity)) / float(activity.size)


def percent_inactive_at(
    tensor: Any, step: int, is_active: Callable[[np.ndarray], np.ndarray], threshold_inactivity: float
) -> float | None:
    """`percent_inactive_units` of the tensor's raw value at `step`; None when it was not saved
    raw, has no samples, or has no unit left to judge."""
    raw = value_or_none(tensor, step)
    value = None if raw is None else as_samples_by_units(raw)
    if value is None:
        return None
    return percent_inactive_units(value, is_active(value), threshold_inactivity)
