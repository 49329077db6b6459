"""The cost of the hook's training records (hook/records.py, issue 28): the same training through
the hook with and without the records collection, at save_interval 1 and 100, side by side in one
run (interleaved rounds, the median of each variant's per-round step time), printing the ratios.

    python benchmarks/records_overhead.py [--steps 200] [--rounds 5] [--json out.json]

The model: an MLP of about 1 M parameters (784-1024-256-10, batch 64, SGD) on one torch thread,
CPU. Targets (issue 28): records on / off <= x1.07 at save_interval 1, <= 2 % at 100. Both
variants save the losses at the same interval (a job's hook with a rule attached)."""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

from sdlocal.hook.config import HookConfig
from sdlocal.hook.pytorch import Hook


def one_run(out: Path, interval: int, records: bool, steps: int) -> tuple[float, float]:
    """(wall, CPU) seconds per training step (after 10 warm-up steps), the hook's close included.
    CPU time (the process's, every thread) is the steadier measure on a shared machine."""
    torch.manual_seed(0)
    colls = [{"CollectionName": "losses"}] + ([{"CollectionName": "sdlocal_records"}] if records else [])
    hook = Hook(HookConfig.from_dict({"HookParameters": {"save_interval": str(interval)},
                                      "CollectionConfigurations": colls}), out_dir=out)
    model = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 256), nn.ReLU(), nn.Linear(256, 10))
    crit = nn.CrossEntropyLoss()
    hook.register_module(model)
    hook.register_loss(crit)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(64 * 8, 784), torch.randint(0, 10, (64 * 8,))

    def step(i: int) -> None:
        b = (i % 8) * 64
        opt.zero_grad()
        crit(model(x[b:b + 64]), y[b:b + 64]).backward()
        opt.step()

    for i in range(10):
        step(i)
    start, cpu = time.perf_counter(), time.process_time()
    for i in range(10, 10 + steps):
        step(i)
    hook.close()
    return (time.perf_counter() - start) / steps, (time.process_time() - cpu) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(1)
    times: dict[str, list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="sdlocal-records-bench-") as tmp:
        for r in range(args.rounds):
            for interval in (1, 100):
                for records in ((False, True) if r % 2 == 0 else (True, False)):
                    key = f"interval {interval} records {'on' if records else 'off'}"
                    out = Path(tmp) / f"{r}-{interval}-{records}"
                    times.setdefault(key, []).append(one_run(out, interval, records, args.steps))
    result: dict[str, object] = {"rounds": args.rounds, "steps": args.steps}
    for i, clock in enumerate(("wall", "cpu")):
        med = {k: statistics.median(t[i] for t in v) for k, v in times.items()}
        result[f"median_step_s_{clock}"] = med
        for interval, target in ((1, 1.07), (100, 1.02)):
            on, off = med[f"interval {interval} records on"], med[f"interval {interval} records off"]
            result[f"ratio_{clock}_interval_{interval}"] = on / off
            print(f"{clock:4} save_interval {interval:3}: records on {on * 1e3:.2f} ms/step, off {off * 1e3:.2f} "
                  f"ms/step: x{on / off:.3f} (target <= x{target})")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
