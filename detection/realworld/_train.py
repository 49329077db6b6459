"""What the real-world cases share: the hook as a job with the records rules attached configures it,
and small models and data (deterministic: seeded per case)."""
from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from sdlocal.hook.config import HookConfig
from sdlocal.hook.pytorch import Hook


def hook(trial_dir: Path, save_interval: str = "1", include_workers: str = "one") -> Hook:
    """The hook of a job with the records rules attached (their default collection, and the job's
    save_interval replacing theirs as under `sdlocal run`) plus the losses. One torch thread: tiny
    models only get contention from more."""
    torch.set_num_threads(1)
    config = HookConfig.from_dict({
        "HookParameters": {"save_interval": save_interval, "include_workers": include_workers},
        "CollectionConfigurations": [{"CollectionName": "sdlocal_records"}, {"CollectionName": "losses"}],
    })
    return Hook(config, out_dir=trial_dir)


def blobs(n: int = 256, features: int = 16, classes: int = 4, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(classes, features, generator=g) * 2
    y = torch.randint(0, classes, (n,), generator=g)
    return centers[y] + torch.randn(n, features, generator=g), y


def mlp(features: int = 16, classes: int = 4, hidden: int = 32) -> nn.Module:
    return nn.Sequential(nn.Linear(features, hidden), nn.BatchNorm1d(hidden), nn.ReLU(), nn.Dropout(0.2),
                         nn.Linear(hidden, classes))


def batches(x: torch.Tensor, y: torch.Tensor, size: int, seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))
    return [(x[order[i:i + size]], y[order[i:i + size]]) for i in range(0, len(x) - size + 1, size)]
