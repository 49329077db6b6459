"""A script that runs its model before it creates its hook (a sanity check, a model summary): under
`python -m sdlocal.hook.run` the zero-code hook attaches at that first forward and hands over to the
script's hook when the script creates it."""
import argparse

import smdebug.pytorch as smd
import torch
import torch.nn as nn


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--warmup", type=int, default=1, help="forward passes before the hook exists")
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 2))
    loss_fn = nn.CrossEntropyLoss()
    with torch.no_grad():
        for _ in range(args.warmup):
            assert model(torch.zeros(2, 5)).shape == (2, 2)
    hook = smd.Hook.create_from_json_file()
    hook.register_module(model)
    hook.register_loss(loss_fn)
    hook.set_mode(smd.modes.TRAIN)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(1)
    for _ in range(args.steps):
        x, y = torch.randn(4, 5, generator=gen), torch.randint(0, 2, (4,), generator=gen)
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()
    print("done")


if __name__ == "__main__":
    main()
