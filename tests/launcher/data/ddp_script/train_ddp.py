"""A PyTorch DDP training script written as SageMaker's multi-node Debugger profiling examples are:
torch.distributed initialised from the environment the launcher sets (env://: RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT; LOCAL_RANK per host), the model wrapped in DistributedDataParallel, the
Debugger hook taken from the job's configuration with `smd.get_hook(create_if_not_exists=True)`.

Each process writes what it saw into /opt/ml/output/data (`seen-rank<R>.json`: SageMaker aggregates
every host's output data into output.tar.gz); rank 0 saves the model. `--fail-rank R` makes rank R
end with `os._exit(3)` at step `--fail-at-step`, as a process that dies without a word;
`--step-seconds` slows each step down.
"""
import argparse
import json
import os
import time

import smdebug.pytorch as smd
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=0.2)
    parser.add_argument("--backend", default="gloo")
    parser.add_argument("--fail-rank", type=int, default=-1)
    parser.add_argument("--fail-at-step", type=int, default=3)
    parser.add_argument("--step-seconds", type=float, default=0.0)  # a slower training (a stop midway)
    return parser.parse_args()


def dataset(n=512):
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(n, 8, generator=generator)
    y = (x[:, 0] + x[:, 1] > 0).long()
    return TensorDataset(x, y)


def main():
    args = parse_args()
    dist.init_process_group(backend=args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ["LOCAL_RANK"])
    host = os.environ["SM_CURRENT_HOST"]
    print(f"rank {rank} of {world} (local rank {local_rank}) on {host}, hosts {os.environ['SM_HOSTS']}", flush=True)

    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2)))
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    hook = smd.get_hook(create_if_not_exists=True)
    hook.register_module(model)
    hook.register_loss(criterion)

    data = dataset()
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler)
    step = 0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        hook.set_mode(smd.modes.TRAIN)
        model.train()
        for x, y in loader:
            if rank == args.fail_rank and step == args.fail_at_step:
                print(f"rank {rank}: failing on purpose at step {step}", flush=True)
                os._exit(3)
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            step += 1
            time.sleep(args.step_seconds)
        print(f"rank {rank} epoch {epoch} loss {loss.item():.4f}", flush=True)

    with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"seen-rank{rank}.json"), "w") as f:
        json.dump({key: os.environ.get(key) for key in (
            "RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "SM_CURRENT_HOST", "SM_HOSTS",
            "SM_NUM_GPUS", "SM_NUM_CPUS", "CURRENT_HOST")} | {
            "resourceconfig": json.load(open(os.path.join(os.environ["SM_INPUT_CONFIG_DIR"], "resourceconfig.json"))),
            "training_env": {k: json.loads(os.environ["SM_TRAINING_ENV"])[k] for k in (
                "current_host", "hosts", "is_master", "master_hostname", "distribution_hosts")},
            "steps": step}, f)
    if rank == 0:
        torch.save(model.module.state_dict(), os.path.join(os.environ["SM_MODEL_DIR"], "model.pth"))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
