"""The profiling examples' pattern (pytorch_res50_cifar10_dataloader.py):
`get_hook(create_if_not_exists=True)`, then `if hook:` register the model and the loss."""
import argparse

import torch
import torch.nn as nn
import torch.optim as optim
from smdebug import modes
from smdebug.pytorch import get_hook


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--eval-steps", type=int, default=2)
    args = parser.parse_args()
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 3))
    hook = get_hook(create_if_not_exists=True)
    loss_optim = nn.CrossEntropyLoss()
    optimizer = optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    if hook:
        hook.register_module(net)
        hook.register_loss(loss_optim)
    gen = torch.Generator().manual_seed(1)
    if hook:
        hook.set_mode(modes.TRAIN)
    net.train()
    for _ in range(args.steps):
        inputs, targets = torch.randn(6, 10, generator=gen), torch.randint(0, 3, (6,), generator=gen)
        optimizer.zero_grad()
        loss = loss_optim(net(inputs), targets)
        loss.backward()
        optimizer.step()
    if hook:
        hook.set_mode(modes.EVAL)
    net.eval()
    with torch.no_grad():
        for _ in range(args.eval_steps):
            inputs, targets = torch.randn(6, 10, generator=gen), torch.randint(0, 3, (6,), generator=gen)
            loss_optim(net(inputs), targets)
    print("done", "with hook" if hook else "without hook")


if __name__ == "__main__":
    main()
