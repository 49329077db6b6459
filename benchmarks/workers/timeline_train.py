"""The framework-timeline benchmark's training script, with no debugger import (`python -m sdlocal.hook.run`
attaches what the job's configs ask for), fed by a real DataLoader over synthetic data:
- `--model cnn`: a small CNN on MNIST-sized images (1x28x28, 10 classes), the small training;
- `--model mlp`: a tiny MLP (16 -> 64 -> 64 -> 3), steps of well under a millisecond where a
  per-step cost shows most.
Prints one JSON line: per timed step, the mean wall time, the training thread's CPU time and the
whole process's CPU time (background threads included).

    python -m sdlocal.hook.run benchmarks/workers/timeline_train.py --model cnn --warmup 20 --steps 300
"""
from __future__ import annotations

import argparse
import json
import resource
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3)
        self.conv2 = nn.Conv2d(8, 16, 3)
        self.pool = nn.MaxPool2d(2)
        self.relu = nn.ReLU()
        self.fc = nn.Linear(16 * 5 * 5, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.relu(self.conv1(x)))
        x = self.pool(self.relu(self.conv2(x)))
        return self.fc(x.flatten(1))


def make_workload(model_name: str, num_workers: int = 0, batch_size: int = 64
                  ) -> tuple[nn.Module, DataLoader, nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    n = batch_size * 32
    if model_name == "cnn":
        data = TensorDataset(torch.randn(n, 1, 28, 28), torch.randint(0, 10, (n,)))
        model: nn.Module = SmallCNN()
    else:
        data = TensorDataset(torch.randn(n, 16), torch.randint(0, 3, (n,)))
        model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 3))
    loader = DataLoader(data, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                        persistent_workers=num_workers > 0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return model, loader, nn.CrossEntropyLoss(), optimizer


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=("cnn", "mlp"), default="cnn")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--num-workers", type=int, default=0)
    args = p.parse_args()
    torch.set_num_threads(1)  # the other core is left to background threads (ours, or the OS)
    model, loader, criterion, optimizer = make_workload(args.model, args.num_workers, args.batch_size)
    total = args.warmup + args.steps
    step = 0
    started = thread0 = proc0 = 0.0
    while step < total:
        for x, y in loader:
            if step == args.warmup:
                started, thread0, proc0 = time.perf_counter(), time.thread_time(), _process_cpu()
            loss = criterion(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step == total:
                break
    wall, thread, proc = time.perf_counter() - started, time.thread_time() - thread0, _process_cpu() - proc0
    print(json.dumps({"steps": args.steps, "total_steps": total, "step_ms": wall / args.steps * 1000,
                      "thread_cpu_ms": thread / args.steps * 1000, "process_cpu_ms": proc / args.steps * 1000}))


def _process_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)  # every thread of the process, µs resolution
    return r.ru_utime + r.ru_stime


if __name__ == "__main__":
    main()
