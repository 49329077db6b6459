"""GradientsNotReset and RepeatedBatches on a GAN, whose healthy loop looks like both faults when read
step by step: the generator's backward fills the discriminator's gradients after its step, and the
discriminator sees the same fake batch twice per iteration (detached for its own step, then for the
generator's). Judged per optimizer and per iteration (hook/records.py, the rules' docstrings), they
stay silent on the healthy GAN and still fire on a GAN's own versions of the faults: the
discriminator's zero_grad missing, one real batch reused at every iteration."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from detection.realworld._train import hook
from sdlocal.evaluator.api import evaluate_trial
from sdlocal.trial import create_trial
from sdlocal.trial.records import RecordReader

RULES = ("GradientsNotReset", "RepeatedBatches")


def _train_gan(trial: Path, variant: str, save_interval: str = "1", iterations: int = 24) -> None:
    """A DCGAN-style loop (as PyTorch's example: D on real then fake.detach(), D's step, then G
    through D) on 16-feature vectors; the hook follows the discriminator and watches the generator,
    as the zero-code hook does."""
    torch.manual_seed(0)
    disc = nn.Sequential(nn.Linear(16, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1), nn.Sigmoid())
    gen = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 16), nn.Tanh())
    h = hook(trial, save_interval=save_interval)
    h.register_module(disc)
    h.watch_module(gen)
    crit = nn.BCELoss()
    opt_d = torch.optim.Adam(disc.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_g = torch.optim.Adam(gen.parameters(), lr=2e-4, betas=(0.5, 0.999))
    ones, zeros = torch.ones(16, 1), torch.zeros(16, 1)
    fixed_real = torch.rand(16, 16) * 2 - 1
    for _ in range(iterations):
        real = fixed_real if variant == "same_real_batch" else torch.rand(16, 16) * 2 - 1
        if variant != "no_d_zero_grad":
            opt_d.zero_grad()
        fake = gen(torch.randn(16, 4))
        (crit(disc(real), ones) + crit(disc(fake.detach()), zeros)).backward()
        opt_d.step()
        opt_g.zero_grad()
        crit(disc(fake), ones).backward()
        opt_g.step()
    h.close()


def _verdicts(trial: Path) -> dict[str, str]:
    return {r: evaluate_trial(str(trial), r, {}, interval=0.0).status.value for r in RULES}


@pytest.mark.parametrize("save_interval", ["1", "5"])
def test_healthy_gan_fires_neither(tmp_path: Path, save_interval: str) -> None:
    _train_gan(tmp_path / "t", "healthy", save_interval)
    assert _verdicts(tmp_path / "t") == {r: "NoIssuesFound" for r in RULES}
    lines = RecordReader(create_trial(str(tmp_path / "t")).storage).poll()
    final = lines[-1][1]
    # the discriminator's optimizer (first to step) was checked and found reset; the generator's
    # holds none of the discriminator's parameters, which the hook checks
    checked, stale = final["stale_by_optimizer"][0]
    assert checked >= 3 and stale == 0
    assert final["stale_by_optimizer"][1] == [0, 0]
    layout = [line for _, line in lines if line["kind"] == "layout"][-1]
    assert layout["held_by"] == [[0, 1, 2, 3], []]
    # the fake batch came twice per iteration: seen by the hook, with one optimizer step between
    batches = [b for _, line in lines for b in line.get("batches", [])]
    assert len(batches) == 3 * 24 and batches[-2][1] == batches[-1][1]
    assert [c1 - c0 for c0, c1 in zip(batches[-2][2], batches[-1][2], strict=True)] == [1, 0]


def test_gan_without_the_discriminators_zero_grad_fires(tmp_path: Path) -> None:
    _train_gan(tmp_path / "t", "no_d_zero_grad")
    assert _verdicts(tmp_path / "t") == {"GradientsNotReset": "IssuesFound", "RepeatedBatches": "NoIssuesFound"}


def test_gan_reusing_one_real_batch_fires(tmp_path: Path) -> None:
    _train_gan(tmp_path / "t", "same_real_batch")
    assert _verdicts(tmp_path / "t") == {"GradientsNotReset": "NoIssuesFound", "RepeatedBatches": "IssuesFound"}
