"""README's explicit-API example: sdlocal's own hook (hook.pytorch.Hook) created by the script."""
import torch
import torch.nn as nn

from sdlocal.hook.pytorch import Hook
from sdlocal.trial.modes import ModeKeys

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 2))
loss_fn = nn.CrossEntropyLoss()
hook = Hook.create_from_json_file()
hook.register_module(model)
hook.register_loss(loss_fn)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
gen = torch.Generator().manual_seed(1)
for _ in range(6):
    x, y = torch.randn(4, 5, generator=gen), torch.randint(0, 2, (4,), generator=gen)
    optimizer.zero_grad()
    loss_fn(model(x), y).backward()
    optimizer.step()
hook.set_mode(ModeKeys.EVAL)
with torch.no_grad():
    acc = float((model(torch.randn(4, 5, generator=gen)).argmax(1) == 0).float().mean())
hook.save_scalar("accuracy", acc)
hook.close()
print("done")
