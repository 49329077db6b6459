"""Healthy VAE: MLP encoder/decoder on synthetic 8x8 binary-ish images (blurred random strokes),
reconstruction by BCEWithLogitsLoss plus the KL term, Adam."""
from __future__ import annotations

import torch
from _common import parse
from torch import nn

args = parse(__doc__, steps=80, lr=0.003)
gen = torch.Generator().manual_seed(args.seed)
protos = (torch.rand(10, 64, generator=gen) > 0.6).float()


def batch(n: int) -> torch.Tensor:
    x = protos[torch.randint(0, 10, (n,), generator=gen)]
    flip = torch.rand(n, 64, generator=gen) < 0.05
    return torch.where(flip, 1 - x, x)


class VAE(nn.Module):
    def __init__(self, latent: int = 4) -> None:
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2 * latent))
        self.dec = nn.Sequential(nn.Linear(latent, 64), nn.ReLU(), nn.Linear(64, 64))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        mu, logvar = self.enc(x).chunk(2, dim=1)
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
        return self.dec(z), mu, logvar


model = VAE()
recon_loss = nn.BCEWithLogitsLoss(reduction="sum")
opt = torch.optim.Adam(model.parameters(), lr=args.lr)
for step in range(args.steps):
    model.train()
    x = batch(64)
    logits, mu, logvar = model(x)
    kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    loss = (recon_loss(logits, x) + kl) / len(x)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if (step + 1) % args.eval_every == 0:
        model.eval()
        with torch.no_grad():
            xv = batch(128)
            logits, mu, logvar = model(xv)
            val = recon_loss(logits, xv).item() / len(xv)
        print(f"step {step + 1} loss {loss.item():.3f} val recon {val:.3f}", flush=True)
