"""Healthy GAN (DCGAN-style, as PyTorch's example trains it): real 1x8x8 images scaled to [-1, 1]
(the standard range: the generator ends in tanh), the discriminator updated first on real then on
fake images, then the generator, one BCELoss, Adam(0.0002, betas 0.5) for both."""
from __future__ import annotations

import torch
from _common import parse
from torch import nn

args = parse(__doc__, steps=80, lr=0.0002)
gen = torch.Generator().manual_seed(args.seed)
NZ = 8
protos = (torch.rand(6, 1, 8, 8, generator=gen) > 0.8).float()  # mostly background, as MNIST


def real(n: int) -> torch.Tensor:
    x = protos[torch.randint(0, 6, (n,), generator=gen)] + 0.1 * torch.randn(n, 1, 8, 8, generator=gen)
    return x.clamp(0, 1) * 2 - 1  # [0, 1] -> [-1, 1], as transforms.Normalize((0.5,), (0.5,)): mean about -0.6


disc = nn.Sequential(
    nn.Conv2d(1, 16, 4, 2, 1), nn.LeakyReLU(0.2),
    nn.Conv2d(16, 32, 4, 2, 1), nn.BatchNorm2d(32), nn.LeakyReLU(0.2),
    nn.Flatten(), nn.Linear(32 * 2 * 2, 1), nn.Sigmoid(),
)
generator = nn.Sequential(
    nn.Linear(NZ, 32 * 2 * 2), nn.Unflatten(1, (32, 2, 2)), nn.BatchNorm2d(32), nn.ReLU(),
    nn.ConvTranspose2d(32, 16, 4, 2, 1), nn.BatchNorm2d(16), nn.ReLU(),
    nn.ConvTranspose2d(16, 1, 4, 2, 1), nn.Tanh(),
)
criterion = nn.BCELoss()
opt_d = torch.optim.Adam(disc.parameters(), lr=args.lr, betas=(0.5, 0.999))
opt_g = torch.optim.Adam(generator.parameters(), lr=args.lr, betas=(0.5, 0.999))
for step in range(args.steps):
    x = real(32)
    ones, zeros = torch.ones(32, 1), torch.zeros(32, 1)
    opt_d.zero_grad()
    loss_real = criterion(disc(x), ones)
    fake = generator(torch.randn(32, NZ, generator=gen))
    loss_fake = criterion(disc(fake.detach()), zeros)
    (loss_real + loss_fake).backward()
    opt_d.step()
    opt_g.zero_grad()
    loss_g = criterion(disc(fake), ones)
    loss_g.backward()
    opt_g.step()
    if (step + 1) % args.eval_every == 0:
        print(f"step {step + 1} loss D {(loss_real + loss_fake).item():.3f} G {loss_g.item():.3f}", flush=True)
