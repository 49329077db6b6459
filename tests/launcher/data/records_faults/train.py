"""A plain PyTorch loop, run unchanged under the zero-code hook, with one silent error chosen by
--fault (none: the healthy loop): the faults the rules beyond Debugger are for.

- no_zero_grad: the loop never calls optimizer.zero_grad()           (GradientsNotReset)
- eval_in_train: validation under no_grad without model.eval()       (EvaluationMisuse)
- frozen_bn: stage 1 frozen, its BatchNorm left in training mode      (FrozenParametersChanged)
- late_layer: a layer added after the optimizer was made              (ParametersNotTraining)
"""
import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--fault", default="none")
fault = parser.parse_args().fault

torch.manual_seed(0)
torch.set_num_threads(1)
x = torch.randn(320, 16)
y = (x[:, 0] + x[:, 1] > 0).long()
xv, yv = x[256:], y[256:]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stage1 = nn.Sequential(nn.Linear(16, 32), nn.BatchNorm1d(32), nn.ReLU())
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(32, 2)
        self.extra = None

    def forward(self, inputs):
        h = self.drop(self.stage1(inputs))
        if self.extra is not None:
            h = torch.relu(self.extra(h))
        return self.head(h)


model, crit = Net(), nn.CrossEntropyLoss()
if fault == "frozen_bn":
    for p in model.stage1.parameters():
        p.requires_grad = False
opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.05)
if fault == "late_layer":
    model.extra = nn.Linear(32, 32)  # built after the optimizer: never trained
for epoch in range(3):
    model.train()
    for i in range(8):
        xb, yb = x[i * 32:(i + 1) * 32], y[i * 32:(i + 1) * 32]
        if fault != "no_zero_grad":
            opt.zero_grad()
        loss = crit(model(xb), yb)
        loss.backward()
        opt.step()
    if fault != "eval_in_train":
        model.eval()
    with torch.no_grad():
        for b in range(2):
            crit(model(xv[b * 32:(b + 1) * 32]), yv[b * 32:(b + 1) * 32])
    print(f"epoch {epoch} loss {loss.item():.4f}")
