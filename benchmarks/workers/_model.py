"""The benchmark workload: one model, one data set, one training loop shape for every variant.

Imported by the worker scripts under both interpreters (ours: the system python; smdebug: its
side virtualenv), so it may depend on torch and the standard library only.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
from torch import nn

LAYER_SIZES = (512, 1024, 512, 10)
BATCH_SIZE = 64
NUM_BATCHES = 8  # distinct batches cycled through; generated once, outside the timed loop
NUM_THREADS = 1  # leave the second core to the hook's background writer thread


class Net(nn.Module):
    """An MLP 512 -> 1024 -> 512 -> 10: 1,055,242 parameters in 3 weights and 3 biases."""

    def __init__(self) -> None:
        super().__init__()
        a, b, c, d = LAYER_SIZES
        self.fc1 = nn.Linear(a, b)
        self.fc2 = nn.Linear(b, c)
        self.fc3 = nn.Linear(c, d)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(self.relu(self.fc2(self.relu(self.fc1(x)))))


def pin_threads() -> None:
    torch.set_num_threads(NUM_THREADS)
    try:
        torch.set_num_interop_threads(NUM_THREADS)
    except RuntimeError:  # already set once parallel work started; harmless
        pass


def make_workload(seed: int = 0) -> tuple[Net, nn.Module, torch.optim.Optimizer, list[tuple[torch.Tensor, torch.Tensor]]]:
    torch.manual_seed(seed)
    model = Net()
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = [
        (torch.randn(BATCH_SIZE, LAYER_SIZES[0]), torch.randint(0, LAYER_SIZES[-1], (BATCH_SIZE,)))
        for _ in range(NUM_BATCHES)
    ]
    return model, loss_fn, optimizer, batches


def train(
    model: nn.Module,
    loss_fn: nn.Module,
    optimizer: torch.optim.Optimizer,
    batches: list[tuple[torch.Tensor, torch.Tensor]],
    *,
    warmup: int,
    steps: int,
    clock: Callable[[], float] = time.perf_counter,
    cpu_clock: Callable[[], float] = time.process_time,
) -> tuple[float, float, float]:
    """Runs `warmup` untimed steps then `steps` timed ones; returns (timed wall seconds, CPU seconds
    of the whole process over the same span, last loss). CPU time counts every thread (the hook's
    writer too) and is much less disturbed than wall time by other processes on a busy machine."""
    loss_value = float("nan")
    start = cpu_start = 0.0
    for i in range(warmup + steps):
        if i == warmup:
            start, cpu_start = clock(), cpu_clock()
        x, y = batches[i % len(batches)]
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        loss_value = float(loss.detach())
    return clock() - start, cpu_clock() - cpu_start, loss_value
