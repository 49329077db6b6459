"""What every healthy script shares: SageMaker-style `--name value` hyperparameters, one CPU thread."""
from __future__ import annotations

import argparse

import torch


def parse(doc: str, steps: int, **extra: float) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=doc)
    p.add_argument("--steps", type=int, default=steps)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-every", type=int, default=20)
    for name, default in extra.items():
        p.add_argument(f"--{name.replace('_', '-')}", type=type(default), default=default)
    args, _ = p.parse_known_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    return args
