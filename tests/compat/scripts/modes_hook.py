"""Per-mode save configs (smdebug's docs/api.md, "Specifying different configuration based on
mode"): SaveConfig(mode_save_configs={...: SaveConfigMode(...)}), a collection with its own partial
per-mode config, and set_mode(smd.modes.EVAL) for the evaluation passes."""
import argparse

import smdebug.pytorch as smd
import torch
import torch.nn as nn


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out-dir", default=None)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--eval-steps", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    loss_fn = nn.CrossEntropyLoss()
    save_config = smd.SaveConfig(mode_save_configs={
        smd.modes.TRAIN: smd.SaveConfigMode(save_interval=3),
        smd.modes.EVAL: smd.SaveConfigMode(save_steps=[0, 2], save_interval=100),
    })
    hook = smd.Hook(out_dir=args.out_dir or "/opt/ml/output/tensors", save_config=save_config,
                    include_collections=["weights", "gradients", "outputs"])
    hook.get_collection("gradients").save_config = {smd.modes.TRAIN: smd.SaveConfigMode(save_interval=2)}
    hook.get_collection("outputs").include(".*_output_0")
    hook.register_module(model)
    hook.register_loss(loss_fn)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(1)
    for _ in range(args.epochs):
        hook.set_mode(smd.modes.TRAIN)
        for _ in range(args.steps):
            x, y = torch.randn(4, 6, generator=gen), torch.randint(0, 3, (4,), generator=gen)
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
        hook.set_mode(smd.modes.EVAL)
        with torch.no_grad():
            for _ in range(args.eval_steps):
                x, y = torch.randn(4, 6, generator=gen), torch.randint(0, 3, (4,), generator=gen)
                loss_fn(model(x), y)
    print("done")


if __name__ == "__main__":
    main()
