"""LossNotDecreasing compares window means (issue 28): a language model's noisy per-batch loss that
goes down is silent, a flat one (noisy or not) and a rising one still fire."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from sdlocal.evaluator.rule import Verdict
from sdlocal.evaluator.rules import LossNotDecreasing
from tests.evaluator._trials import losses, make_trial


def fired(values: np.ndarray, tmp_path: Path, **params: str) -> list[int]:
    trial = make_trial(tmp_path, losses(values.tolist()))
    rule = LossNotDecreasing(trial, **params)
    return [s for s in range(len(values)) if rule.judge_step(s) is Verdict.CONDITION_MET]


def lm_losses(trend: float, noise: float = 0.15, steps: int = 200, seed: int = 0) -> np.ndarray:
    """A language model's per-batch loss: from 6.0 down `trend` a step, batch-to-batch noise."""
    rng = np.random.default_rng(seed)
    return 6.0 - trend * np.arange(steps) + rng.normal(0, noise, steps)


def test_a_noisy_decreasing_loss_is_silent(tmp_path: Path) -> None:
    values = lm_losses(trend=0.02)  # 0.2 down per 10 steps, noise 0.15 a batch
    single = [s for s in range(10, 200, 10) if values[s - 10] - values[s] < values[s - 10] * 0.001]
    assert single  # smdebug's single-point comparison fires on this healthy run
    assert fired(values, tmp_path) == []


def test_a_flat_loss_fires_noisy_or_not(tmp_path: Path) -> None:
    assert fired(lm_losses(trend=0.0), tmp_path / "noisy")
    assert fired(np.full(40, 2.0), tmp_path / "flat") == [10, 20, 30]


def test_a_rising_window_fires(tmp_path: Path) -> None:
    values = np.concatenate([np.linspace(3.0, 1.0, 30), np.linspace(1.0, 1.5, 30)])
    # the lowest window mean is that of steps 31-40 (1.09); steps 41-50 average 1.26: > 5 % above
    assert fired(values, tmp_path)[0] == 50
