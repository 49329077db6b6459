"""save_scalar / save_tensor (smdebug's docs/api.md): a metric per step, a tensor computed in the
step into the default collection and into a custom one, on a hook from the job's config."""
import argparse

import smdebug.pytorch as smd
import torch
import torch.nn as nn


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 2))
    loss_fn = nn.CrossEntropyLoss()
    hook = smd.Hook.create_from_json_file()
    hook.get_collection("my_metrics").include("step_marker")  # smdebug 1.0 fails on an unconfigured one
    hook.register_module(model)
    hook.register_loss(loss_fn)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(1)
    for step in range(args.steps):
        x, y = torch.randn(4, 5, generator=gen), torch.randint(0, 2, (4,), generator=gen)
        optimizer.zero_grad()
        logits = model(x)
        loss = loss_fn(logits, y)
        probs = torch.softmax(logits, dim=1).detach()
        hook.save_tensor("probabilities", probs)  # the default collection
        hook.save_tensor("step_marker", torch.full((3,), float(step)), collections_to_write="my_metrics")
        hook.save_scalar("accuracy", float((logits.argmax(1) == y).float().mean()), sm_metric=True)
        loss.backward()
        optimizer.step()
    print("done")


if __name__ == "__main__":
    main()
