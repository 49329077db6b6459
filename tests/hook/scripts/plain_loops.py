"""Unchanged plain PyTorch loops (no smdebug, no sdlocal), run by tests/hook/test_frameworks.py:

--case distill: a frozen teacher (no optimizer holds it, though its parameters require grad)
  runs forward first; the student learns its outputs with F.kl_div + F.cross_entropy.
--case gan: a generator and a discriminator, two optimizers, two losses backpropagated per step
  (F.binary_cross_entropy_with_logits).
--case masked: an nn.TransformerEncoder classifier trained with F.cross_entropy, evaluated with a
  padding mask (PyTorch's fast path returns a nested tensor from the encoder).
"""
import argparse

import torch
import torch.nn.functional as F
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--case", default="distill")
p.add_argument("--steps", type=int, default=6)
args = p.parse_args()
torch.manual_seed(0)

if args.case == "distill":
    teacher = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4)).eval()
    student = nn.Sequential(nn.Linear(8, 4))
    opt = torch.optim.SGD(student.parameters(), lr=0.1)
    for _ in range(args.steps):
        x = torch.randn(16, 8)
        with torch.no_grad():
            soft = teacher(x)
        logits = student(x)
        loss = F.kl_div(F.log_softmax(logits, -1), F.softmax(soft, -1), reduction="batchmean") \
            + F.cross_entropy(logits, soft.argmax(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()

elif args.case == "gan":
    class Generator(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8))

        def forward(self, z):
            return self.net(z)

    class Discriminator(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))

        def forward(self, x):
            return self.net(x)

    G, D = Generator(), Discriminator()
    opt_g, opt_d = torch.optim.Adam(G.parameters(), 1e-3), torch.optim.Adam(D.parameters(), 1e-3)
    for _ in range(args.steps):
        real, z = torch.randn(16, 8) + 2, torch.randn(16, 4)
        fake = G(z)
        d_loss = F.binary_cross_entropy_with_logits(D(real), torch.ones(16, 1)) \
            + F.binary_cross_entropy_with_logits(D(fake.detach()), torch.zeros(16, 1))
        opt_d.zero_grad()
        d_loss.backward()
        opt_d.step()
        g_loss = F.binary_cross_entropy_with_logits(D(fake), torch.ones(16, 1))
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()

elif args.case == "masked":
    class Encoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(20, 16)
            layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=True)
            self.head = nn.Linear(16, 2)

        def forward(self, ids, pad):
            h = self.encoder(self.embed(ids), src_key_padding_mask=pad)
            if h.is_nested:
                h = h.to_padded_tensor(0.0, (ids.shape[0], ids.shape[1], 16))
            return self.head(h.mean(1))

    model = Encoder()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    ids, pad = torch.randint(0, 20, (8, 6)), torch.zeros(8, 6, dtype=torch.bool)
    pad[:, 4:] = True
    labels = (ids[:, 0] < 10).long()
    for _ in range(args.steps):
        model.train()
        loss = F.cross_entropy(model(ids, pad), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        model.eval()
        with torch.no_grad():  # the fast path: the encoder's output is a nested tensor
            model(ids, pad)
print("done")
