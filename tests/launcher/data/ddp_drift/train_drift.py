"""A PyTorch DDP script (gloo on CPU, torch.distributed from the launcher's environment) with no
Debugger code: the zero-code hook attaches to the DDP wrapper. `--bypass` is the bug of
detection/realworld's ddp_drift case: every other step calls the wrapped module directly, so that
step's gradients are not averaged and the replicas drift apart."""
import argparse

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bypass", default="false")
    args = parser.parse_args()
    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    inner = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    model = DDP(inner)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(256, 8, generator=generator)
    y = (x[:, 0] > 0).long()
    x, y = x[rank::world], y[rank::world]
    for i in range(0, len(x), 16):
        optimizer.zero_grad()
        out = inner(x[i:i + 16]) if args.bypass.lower() == "true" and (i // 16) % 2 else model(x[i:i + 16])
        criterion(out, y[i:i + 16]).backward()
        optimizer.step()
    print(f"rank {rank} done", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
