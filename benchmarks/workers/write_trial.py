"""Writes one trial for the reader benchmark, in its own process; prints one JSON object.

    python write_trial.py --writer ours|smdebug --workload small|large --steps S --out-dir DIR

`small`: a deep narrow MLP (LAYERS Linear(WIDTH, WIDTH) layers): every step saves each weight,
bias, their gradients and the loss (dozens of tensors of at most WIDTH*WIDTH floats).
`large`: one Linear layer whose weight is LARGE_ROWS x LARGE_COLS float32 (128 MiB by default);
every step saves that weight (and the loss, which smdebug's hook always saves).

`smdebug` trains the model for S steps with `smdebug.pytorch.Hook` (save_interval 1) in the side
virtualenv: the files are the real smdebug hook's. `ours` writes the same tensor names and shapes
with `sdlocal.trial.TrialWriter` (random values, TRAIN mode), then the collections file and the end marker.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

LAYERS = 12
WIDTH = 32
LARGE_ROWS, LARGE_COLS = 4096, 8192  # 128 MiB of float32


def small_tensors() -> list[tuple[str, tuple[int, ...]]]:
    """The names and shapes smdebug's hook saves for the small model (module `Net`, layers in an
    nn.Sequential called `layers`): weights, biases, gradients of both, the loss."""
    params: list[tuple[str, tuple[int, ...]]] = []
    for i in range(LAYERS):
        params += [(f"Net_layers.{i}.weight", (WIDTH, WIDTH)), (f"Net_layers.{i}.bias", (WIDTH,))]
    return params + [(f"gradient/{n}", s) for n, s in params] + [("CrossEntropyLoss_output_0", ())]


def large_tensors(rows: int, cols: int) -> list[tuple[str, tuple[int, ...]]]:
    """smdebug's hook saves the registered loss whatever the collections: so do we."""
    return [("Big_fc.weight", (rows, cols)), ("CrossEntropyLoss_output_0", ())]


def write_ours(out_dir: Path, workload: str, steps: int, rows: int, cols: int) -> None:
    from sdlocal.trial import Collection, TrialWriter

    tensors = small_tensors() if workload == "small" else large_tensors(rows, cols)
    rng = np.random.default_rng(0)
    # Values are generated once per distinct shape and shifted per step: the point is the files.
    base = {shape: rng.standard_normal(shape, dtype=np.float32) for _, shape in tensors}
    writer = TrialWriter(out_dir)
    for step in range(steps):
        writer.write_step(step, "TRAIN", step, [(name, base[shape] + np.float32(step)) for name, shape in tensors])
    names = [name for name, _ in tensors]
    collections = [
        Collection("weights", tensor_names=frozenset(n for n in names if n.endswith(".weight")
                                                     and not n.startswith("gradient/"))),
        Collection("biases", tensor_names=frozenset(n for n in names if n.endswith(".bias")
                                                    and not n.startswith("gradient/"))),
        Collection("gradients", tensor_names=frozenset(n for n in names if n.startswith("gradient/"))),
        Collection("losses", tensor_names=frozenset(n for n in names if "Loss" in n)),
    ]
    writer.write_collections(collections)
    writer.write_end_marker()


def write_smdebug(out_dir: Path, workload: str, steps: int, rows: int, cols: int) -> None:
    import smdebug.pytorch as smd
    import torch
    from torch import nn

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model: Any
    if workload == "small":
        class Net(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.layers = nn.Sequential(*[nn.Linear(WIDTH, WIDTH) for _ in range(LAYERS)])

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return self.layers(x)

        model, collections = Net(), ["weights", "biases", "gradients", "losses"]
        x, y = torch.randn(8, WIDTH), torch.randint(0, WIDTH, (8,))
    else:
        class Big(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.fc = nn.Linear(cols, rows, bias=False)

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return self.fc(x)

        model, collections = Big(), ["weights"]
        x, y = torch.randn(1, cols), torch.randint(0, rows, (1,))
    loss_fn = nn.CrossEntropyLoss()
    hook = smd.Hook(out_dir=str(out_dir), save_config=smd.SaveConfig(save_interval=1),
                    include_collections=collections)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(steps):
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
    hook.close()
    # smdebug writes training_job_end.ts from an atexit handler, after this process prints.


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--writer", choices=("ours", "smdebug"), required=True)
    parser.add_argument("--workload", choices=("small", "large"), required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--rows", type=int, default=LARGE_ROWS)
    parser.add_argument("--cols", type=int, default=LARGE_COLS)
    parser.add_argument("--out-dir", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.out_dir.exists() and any(args.out_dir.iterdir()):
        parser.error(f"--out-dir {args.out_dir} is not empty: each trial is written fresh")
    start = time.perf_counter()
    write = write_ours if args.writer == "ours" else write_smdebug
    write(args.out_dir, args.workload, args.steps, args.rows, args.cols)
    print(json.dumps({"writer": args.writer, "workload": args.workload, "steps": args.steps,
                      "write_s": time.perf_counter() - start}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
