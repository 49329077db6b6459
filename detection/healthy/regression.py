"""Healthy regression: an MLP (tanh hidden layers) fits a smooth function of 8 standardised
features plus noise with MSELoss, SGD, an evaluation pass every `eval_every` steps."""
from __future__ import annotations

import torch
from _common import parse
from torch import nn

args = parse(__doc__, steps=80, lr=0.05)
gen = torch.Generator().manual_seed(args.seed)
w = torch.randn(8, 1, generator=gen)


def batch(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(n, 8, generator=gen)
    return x, torch.sin(x @ w) + 0.5 * (x[:, :1] ** 2) + 0.1 * torch.randn(n, 1, generator=gen)


model = nn.Sequential(nn.Linear(8, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1))
criterion = nn.MSELoss()
opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
for step in range(args.steps):
    model.train()
    x, y = batch(64)
    loss = criterion(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if (step + 1) % args.eval_every == 0:
        model.eval()
        with torch.no_grad():
            xv, yv = batch(256)
            val = criterion(model(xv), yv).item()
        print(f"step {step + 1} loss {loss.item():.3f} val {val:.3f}", flush=True)
