"""A small PyTorch training loop fed by a real torch.utils.data.DataLoader, with no debugger import
(unless --own-hook): the framework-metrics tests run it under `python -m sdlocal.hook.run`.

Each epoch trains on every batch of the training loader and, with --eval, runs the model in eval
mode over the validation loader. Prints one JSON line at the end: the TRAIN and EVAL steps run.
"""
from __future__ import annotations

import argparse
import json
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Blobs(Dataset):
    """Deterministic synthetic samples (the same in every worker process)."""

    def __init__(self, n: int, features: int, classes: int, seed: int, delay_s: float) -> None:
        gen = torch.Generator().manual_seed(seed)
        centres = torch.randn(classes, features, generator=gen) * 1.5
        self.y = torch.randint(0, classes, (n,), generator=gen)
        self.x = centres[self.y] + torch.randn(n, features, generator=gen)
        self.delay_s = delay_s

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.delay_s:
            time.sleep(self.delay_s)
        return self.x[i], self.y[i]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--samples", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--num-workers", type=int, default=0)
    p.add_argument("--persistent-workers", action="store_true")
    p.add_argument("--pin-memory", action="store_true")
    p.add_argument("--eval", action="store_true")
    p.add_argument("--delay-ms", type=float, default=0.0, help="sleep per sample in the dataset")
    p.add_argument("--step-sleep-ms", type=float, default=0.0, help="sleep inside each training step")
    p.add_argument("--own-hook", action="store_true", help="create smdebug.pytorch.Hook() and register the model")
    p.add_argument("--out-dir", default=None, help="the own hook's out_dir")
    p.add_argument("--fail-at-step", type=int, default=None)
    args = p.parse_args()

    torch.manual_seed(0)
    train = Blobs(args.samples, 16, 3, 0, args.delay_ms / 1000)
    val = Blobs(args.batch_size * 2, 16, 3, 1, args.delay_ms / 1000)
    kw = {"num_workers": args.num_workers, "pin_memory": args.pin_memory}
    if args.num_workers:
        kw["persistent_workers"] = args.persistent_workers
    train_loader = DataLoader(train, batch_size=args.batch_size, shuffle=True, **kw)
    val_loader = DataLoader(val, batch_size=args.batch_size, **kw)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 3))
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    hook = None
    if args.own_hook:
        import smdebug.pytorch as smd

        hook = smd.Hook(out_dir=args.out_dir)
        hook.register_module(model)
    train_steps = eval_steps = 0
    for _ in range(args.epochs):
        model.train()
        if hook is not None:
            hook.set_mode(smd.modes.TRAIN)
        for x, y in train_loader:
            if args.fail_at_step is not None and train_steps == args.fail_at_step:
                raise RuntimeError(f"failing on purpose at step {train_steps}")
            loss = criterion(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            if args.step_sleep_ms:
                time.sleep(args.step_sleep_ms / 1000)
            optimizer.step()
            train_steps += 1
        if args.eval:
            model.eval()
            if hook is not None:
                hook.set_mode(smd.modes.EVAL)
            with torch.no_grad():
                for x, y in val_loader:
                    criterion(model(x), y)
                    eval_steps += 1
    if hook is not None:
        hook.close()
    print(json.dumps({"train_steps": train_steps, "eval_steps": eval_steps}))


if __name__ == "__main__":
    main()
