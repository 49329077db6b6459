"""Healthy CNN classifier: conv-BatchNorm-ReLU blocks on normalised synthetic 12x12 images of 4
classes (a class's pattern plus noise), SGD with momentum, an evaluation pass every `eval_every` steps."""
from __future__ import annotations

import torch
from _common import parse
from torch import nn

args = parse(__doc__, steps=80, lr=0.05)
gen = torch.Generator().manual_seed(args.seed)
patterns = torch.randn(4, 3, 12, 12, generator=gen)


def batch(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    y = torch.randint(0, 4, (n,), generator=gen)
    x = patterns[y] + 1.5 * torch.randn(n, 3, 12, 12, generator=gen)
    return (x - x.mean(dim=(0, 2, 3), keepdim=True)) / x.std(dim=(0, 2, 3), keepdim=True), y


model = nn.Sequential(
    nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
    nn.Flatten(), nn.Linear(32, 4),
)
criterion = nn.CrossEntropyLoss()
opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
for step in range(args.steps):
    model.train()
    x, y = batch(32)
    loss = criterion(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if (step + 1) % args.eval_every == 0:
        model.eval()
        with torch.no_grad():
            xv, yv = batch(128)
            acc = (model(xv).argmax(1) == yv).float().mean().item()
        print(f"step {step + 1} loss {loss.item():.3f} val acc {acc:.2f}", flush=True)
