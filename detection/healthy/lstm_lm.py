"""Healthy LSTM language model: next-token prediction on sequences of a random sparse Markov chain
over 2,000 tokens (noisy per-batch losses that go down; the embedding's gradient is zero in the
rows a batch did not use), Adam, gradient clipping."""
from __future__ import annotations

import torch
from _common import parse
from torch import nn

args = parse(__doc__, steps=80, lr=0.005)
gen = torch.Generator().manual_seed(args.seed)
VOCAB, LENGTH = 2000, 24
succ = torch.randint(0, VOCAB, (VOCAB, 3), generator=gen)  # each token has 3 likely successors


def batch(n: int) -> torch.Tensor:
    seq = torch.empty(n, LENGTH + 1, dtype=torch.long)
    seq[:, 0] = torch.randint(0, VOCAB, (n,), generator=gen)
    for t in range(LENGTH):
        seq[:, t + 1] = succ[seq[:, t], torch.randint(0, 3, (n,), generator=gen)]
    return seq


class LSTMLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32)
        self.lstm = nn.LSTM(32, 64, batch_first=True)
        self.head = nn.Linear(64, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(self.embed(tokens))
        return self.head(out).reshape(-1, VOCAB)


model = LSTMLM()
criterion = nn.CrossEntropyLoss()
opt = torch.optim.Adam(model.parameters(), lr=args.lr)
for step in range(args.steps):
    model.train()
    seq = batch(16)
    loss = criterion(model(seq[:, :-1]), seq[:, 1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    if (step + 1) % args.eval_every == 0:
        model.eval()
        with torch.no_grad():
            seq = batch(64)
            val = criterion(model(seq[:, :-1]), seq[:, 1:].reshape(-1)).item()
        print(f"step {step + 1} loss {loss.item():.3f} val {val:.3f}", flush=True)
