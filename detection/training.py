"""One detection run: train a model through our hook (explicit Hook API) into a local trial."""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from detection.hookconfig import hook_config
from sdlocal.hook.pytorch import Hook
from sdlocal.trial.modes import ModeKeys

Batch = tuple[torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class Setup:
    """What one run trains: the model, its data and how. `stall_after`/`stall_s`: the training
    stops writing for `stall_s` seconds after that many steps (a hung data loader)."""

    model: nn.Module
    train: Batch
    val: Batch
    steps: int = 40
    batch_size: int = 32
    lr: float = 0.05
    momentum: float = 0.9
    optimizer_step: bool = True
    same_batch: bool = False
    eval_every: int = 5
    eval_batches: int = 2
    eval_batch_size: int = 128  # validation: 2 × 128 samples (64 would be too noisy a mean)
    stall_after: int | None = None
    stall_s: float = 0.0
    notes: dict[str, Any] = field(default_factory=dict)


def train(setup: Setup, trial_dir: Path, *, sleep: Callable[[float], None] = time.sleep) -> dict[str, float]:
    """Train `setup` with the hook attached (TRAIN steps, EVAL passes every `eval_every` steps);
    returns the first/last train loss and the last validation loss."""
    torch.set_num_threads(1)  # tiny models: threads only add noise and contention
    hook = Hook(hook_config(trial_dir), out_dir=trial_dir)
    model, criterion = setup.model, nn.CrossEntropyLoss()
    hook.register_module(model)
    hook.register_loss(criterion)
    opt = torch.optim.SGD(model.parameters(), lr=setup.lr, momentum=setup.momentum)
    x, y = setup.train
    xv, yv = setup.val
    n_batches = max(len(x) // setup.batch_size, 1)
    bs = setup.batch_size
    losses: list[float] = []
    val_loss = float("nan")
    try:
        for step in range(setup.steps):
            if setup.stall_after is not None and step == setup.stall_after:
                sleep(setup.stall_s)
            hook.set_mode(ModeKeys.TRAIN)
            model.train()
            i = 0 if setup.same_batch else (step % n_batches) * bs
            loss = criterion(model(x[i:i + bs]), y[i:i + bs])
            opt.zero_grad()
            loss.backward()
            if setup.optimizer_step:
                opt.step()
            losses.append(float(loss.item()))
            if setup.eval_every and (step + 1) % setup.eval_every == 0:
                hook.set_mode(ModeKeys.EVAL)
                model.eval()
                with torch.no_grad():
                    total = 0.0
                    for b in range(setup.eval_batches):
                        sl = slice(b * setup.eval_batch_size, (b + 1) * setup.eval_batch_size)
                        total += float(criterion(model(xv[sl]), yv[sl]).item())
                val_loss = total / setup.eval_batches
    finally:
        hook.close()
    return {"first_loss": losses[0], "last_loss": losses[-1], "val_loss": val_loss}
