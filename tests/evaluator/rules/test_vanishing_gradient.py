"""VanishingGradient on the gradients healthy runs have: an embedding's (sparse rows) and a bias
followed by BatchNorm (zero by construction); a gradient that vanished still fires."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from sdlocal.evaluator.rule import Verdict
from sdlocal.evaluator.rules import VanishingGradient
from tests.evaluator._trials import make_trial, train_steps

EMB = "gradient/LM_embed.weight"
CONV_BIAS = "gradient/Net_conv1.bias"
FC = "gradient/Net_fc1.weight"


def embedding_gradient(vocab: int = 30_000, dim: int = 32, used: int = 200) -> np.ndarray:
    """The gradient of a 30,000-token embedding after a batch that used 200 tokens."""
    g = np.zeros((vocab, dim), np.float32)
    rows = np.random.default_rng(0).choice(vocab, used, replace=False)
    g[rows] = np.random.default_rng(1).normal(0, 1e-5, (used, dim)).astype(np.float32)
    return g


def test_a_sparse_embedding_gradient_is_not_vanishing(tmp_path: Path) -> None:
    g = embedding_gradient()
    assert np.abs(g).mean() < 1e-7  # what smdebug's mean over every row sees: "vanished"
    trial = make_trial(tmp_path, train_steps([{EMB: g, FC: np.full((4, 4), 1e-3, np.float32)}]))
    assert VanishingGradient(trial).judge_step(0) is Verdict.CONDITION_NOT_MET


def test_rows_that_received_a_vanishing_gradient_fire(tmp_path: Path) -> None:
    tiny = embedding_gradient() * 1e-4  # the used rows' gradients are ~1e-9
    zero = np.zeros((50, 8), np.float32)  # no row received anything
    trial = make_trial(tmp_path, train_steps([{EMB: tiny}, {EMB: zero}]))
    assert [VanishingGradient(trial).judge_step(s) for s in range(2)] == [Verdict.CONDITION_MET] * 2


def test_a_bias_before_batchnorm_is_not_judged(tmp_path: Path) -> None:
    """conv -> BatchNorm: the conv bias's gradient is ~1e-9 by construction (the norm removes it)."""
    trial = make_trial(tmp_path, train_steps([{CONV_BIAS: np.full(16, 6e-9, np.float32), FC: np.full((4, 4), 1e-3, np.float32)},
                                              {CONV_BIAS: np.full(16, 6e-9, np.float32), FC: np.full((4, 4), 1e-9, np.float32)}]))
    assert [VanishingGradient(trial).judge_step(s) for s in range(2)] == [Verdict.CONDITION_NOT_MET, Verdict.CONDITION_MET]
