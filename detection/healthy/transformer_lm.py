"""Healthy small Transformer language model (pre-LayerNorm decoder blocks with a causal mask,
learned positions, tied-free head) on a random Markov chain's sequences, AdamW with warmup."""
from __future__ import annotations

import torch
from _common import parse
from torch import nn

args = parse(__doc__, steps=80, lr=0.003)
gen = torch.Generator().manual_seed(args.seed)
VOCAB, LENGTH = 128, 16
succ = torch.randint(0, VOCAB, (VOCAB, 2), generator=gen)


def batch(n: int) -> torch.Tensor:
    seq = torch.empty(n, LENGTH + 1, dtype=torch.long)
    seq[:, 0] = torch.randint(0, VOCAB, (n,), generator=gen)
    for t in range(LENGTH):
        seq[:, t + 1] = succ[seq[:, t], torch.randint(0, 2, (n,), generator=gen)]
    return seq


class TinyGPT(nn.Module):
    def __init__(self, dim: int = 32) -> None:
        super().__init__()
        self.tok = nn.Embedding(VOCAB, dim)
        self.pos = nn.Embedding(LENGTH, dim)
        layer = nn.TransformerEncoderLayer(dim, 4, 64, dropout=0.0, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, VOCAB)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(LENGTH), persistent=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.tok(tokens) + self.pos(torch.arange(tokens.shape[1]))
        h = self.blocks(h, mask=self.mask, is_causal=True)
        return self.head(self.norm(h)).reshape(-1, VOCAB)


model = TinyGPT()
criterion = nn.CrossEntropyLoss()
opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 10))
for step in range(args.steps):
    model.train()
    seq = batch(16)
    loss = criterion(model(seq[:, :-1]), seq[:, 1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
    if (step + 1) % args.eval_every == 0:
        model.eval()
        with torch.no_grad():
            seq = batch(64)
            val = criterion(model(seq[:, :-1]), seq[:, 1:].reshape(-1)).item()
        print(f"step {step + 1} loss {loss.item():.3f} val {val:.3f}", flush=True)
