"""The framework timeline on and off in one process, on the same model, optimizer and DataLoader,
alternating short blocks of steps: slow drifts of a shared machine (other processes, CPU
frequency) hit both sides alike, which separate processes cannot promise.

Without `--hook-config`: ON = what `python -m sdlocal.hook.run` attaches for a job with a profiler config
and no hook config (a TimelineHook on the model, the timeline at the given settings), OFF = plain
training. With `--hook-config` (a debughookconfig.json): both sides run a zero-code Hook with that
config, and ON has the timeline too: what profiling adds on top of Debugger's hook. Between
blocks the hooks are closed and the timeline shut down (probes removed, files closed), outside the
timed steps. Prints one JSON line: per block pair, the per-step wall and training-thread CPU time.

    python benchmarks/workers/timeline_ab.py --model mlp --pairs 200 --block 50 --config cfg.json
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from timeline_train import make_workload  # noqa: E402

from sdlocal.hook import _timeline  # noqa: E402
from sdlocal.hook._autoattach import TimelineHook  # noqa: E402
from sdlocal.hook.config import HookConfig  # noqa: E402
from sdlocal.hook.profiler_config import ProfilerConfig  # noqa: E402
from sdlocal.hook.pytorch import Hook  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=("cnn", "mlp"), default="mlp")
    p.add_argument("--pairs", type=int, default=200)
    p.add_argument("--block", type=int, default=50)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--config", type=Path, required=True, help="profilerconfig.json")
    p.add_argument("--hook-config", type=Path, default=None, help="debughookconfig.json")
    p.add_argument("--work", type=Path, required=True, help="a folder for the hooks' output")
    args = p.parse_args()
    torch.set_num_threads(1)
    profiler = ProfilerConfig.from_json_file(args.config)
    assert profiler.enabled
    hook_config = HookConfig.from_json_file(args.hook_config) if args.hook_config else None
    events = [0]
    model, loader, criterion, optimizer = make_workload(args.model, num_workers=0)
    batches = iter(())

    def steps(n: int) -> None:
        nonlocal batches
        for _ in range(n):
            try:
                x, y = next(batches)
            except StopIteration:
                batches = iter(loader)
                x, y = next(batches)
            loss = criterion(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    def block(on: bool, i: int) -> tuple[float, float]:
        tl = _timeline.configure(profiler if on else None)
        hook: Hook | TimelineHook | None = None
        if hook_config is not None:
            hook = Hook(hook_config, out_dir=args.work / f"tensors-{i}-{on}", auto=True)
        elif tl is not None:
            hook = TimelineHook(tl)
        if hook is not None:
            hook.register_module(model)
        steps(2)  # untimed: the timeline's first step starts its writer thread and optimizer hooks
        w0, c0 = time.perf_counter(), time.thread_time()
        steps(args.block)
        wall, cpu = time.perf_counter() - w0, time.thread_time() - c0
        if hook is not None:
            hook.close()  # the last step, the queue and the open file are written: outside the timing
        if tl is not None:
            tl.close()
            events[0] += tl.events_written
        _timeline.shutdown()  # the optimizer hooks go too
        return wall / args.block * 1000, cpu / args.block * 1000

    steps(args.warmup)
    pairs = []
    for i in range(args.pairs):
        order = (True, False) if i % 2 == 0 else (False, True)
        got = {on: block(on, i) for on in order}
        pairs.append({"on": got[True], "off": got[False]})
    print(json.dumps({"pairs": pairs, "events_written": events[0], "steps_on": args.pairs * args.block}))


if __name__ == "__main__":
    main()
