"""A small PyTorch training script (an MLP classifier on synthetic data), CPU only, with no
debugger import: run it under `python -m sdlocal.hook.run examples/train.py ...` (or `sdlocal run`) and
the hook finds the model and the loss by itself.

    python examples/train.py --steps 50                 # trains healthily, loss decreases
    python examples/train.py --steps 50 --lr 1e5        # diverges: loss and weights become NaN/inf

SageMaker conventions: hyperparameters arrive as `--name value` arguments; the model is saved to
`$SM_MODEL_DIR` (or --model-dir); nothing is saved when neither is set.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections import OrderedDict

import torch
from torch import nn


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.0)
    p.add_argument("--steps", type=int, default=200, help="training steps (batches) in all")
    p.add_argument("--epochs", type=int, default=None, help="if given: steps = epochs * batches-per-epoch")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--samples", type=int, default=2048, help="size of the synthetic training set")
    p.add_argument("--features", type=int, default=16)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers", type=int, default=2, help="hidden layers")
    p.add_argument("--classes", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-every", type=int, default=0, help="run an evaluation pass every N steps (0: never)")
    p.add_argument("--eval-batches", type=int, default=2)
    p.add_argument("--fail-at-step", type=int, default=None, help="raise an error at this step (for tests)")
    p.add_argument("--stall-at-step", type=int, default=None,
                   help="hang (sleep --stall-seconds) before this step, like a stuck data loader (for tests)")
    p.add_argument("--stall-seconds", type=float, default=600.0)
    p.add_argument("--model-dir", default=os.environ.get("SM_MODEL_DIR"),
                   help="where to save the model (default $SM_MODEL_DIR; not saved when unset)")
    p.add_argument("--log-every", type=int, default=10)
    return p.parse_args(argv)


def make_model(features: int, hidden: int, layers: int, classes: int) -> nn.Sequential:
    blocks: OrderedDict[str, nn.Module] = OrderedDict()
    width = features
    for i in range(layers):
        blocks[f"fc{i}"] = nn.Linear(width, hidden)
        blocks[f"layer{i}_relu"] = nn.ReLU()
        width = hidden
    blocks["head"] = nn.Linear(width, classes)
    return nn.Sequential(blocks)


def make_data(n: int, features: int, classes: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Gaussian blobs around random class centres: learnable, not trivially separable."""
    centres = torch.randn(classes, features, generator=gen) * 1.5
    y = torch.randint(0, classes, (n,), generator=gen)
    x = centres[y] + torch.randn(n, features, generator=gen)
    return x, y


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    x, y = make_data(args.samples, args.features, args.classes, gen)
    x_val, y_val = make_data(args.batch_size * max(args.eval_batches, 1), args.features, args.classes, gen)
    batches_per_epoch = max(args.samples // args.batch_size, 1)
    steps = args.epochs * batches_per_epoch if args.epochs is not None else args.steps

    model = make_model(args.features, args.hidden, args.layers, args.classes)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params} parameters; {steps} steps, lr={args.lr}", flush=True)

    started = time.perf_counter()
    first_loss = last_loss = math.nan
    for step in range(steps):
        if args.fail_at_step is not None and step == args.fail_at_step:
            raise RuntimeError(f"failing on purpose at step {step}")
        if args.stall_at_step is not None and step == args.stall_at_step:
            print(f"stalling for {args.stall_seconds:g} s before step {step}", flush=True)
            time.sleep(args.stall_seconds)
        model.train()
        i = (step % batches_per_epoch) * args.batch_size
        xb, yb = x[i:i + args.batch_size], y[i:i + args.batch_size]
        loss = criterion(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        last_loss = float(loss.item())
        if step == 0:
            first_loss = last_loss
        if args.log_every and step % args.log_every == 0:
            print(f"step {step} loss {last_loss:.4f}", flush=True)
        if args.eval_every and (step + 1) % args.eval_every == 0:
            model.eval()
            with torch.no_grad():
                for b in range(args.eval_batches):
                    sl = slice(b * args.batch_size, (b + 1) * args.batch_size)
                    val_loss = criterion(model(x_val[sl]), y_val[sl])
            print(f"step {step} eval loss {float(val_loss):.4f}", flush=True)

    elapsed = time.perf_counter() - started
    print(f"done: first loss {first_loss:.4f}, last loss {last_loss:.4f}, {elapsed:.2f} s", flush=True)
    if args.model_dir:
        os.makedirs(args.model_dir, exist_ok=True)
        torch.save(model.state_dict(), os.path.join(args.model_dir, "model.pt"))
        with open(os.path.join(args.model_dir, "metrics.json"), "w") as f:
            json.dump({"first_loss": first_loss, "last_loss": last_loss, "steps": steps}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
