"""A training script with no debugger code at all (SageMaker's zero-code style): under
`python -m sdlocal.hook.run` the zero-code hook finds the model and the loss."""
import argparse

import torch
import torch.nn as nn


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 2))
    loss_fn = nn.CrossEntropyLoss()
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
