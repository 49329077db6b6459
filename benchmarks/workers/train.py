"""One timed training run in its own process; prints one JSON object on stdout.

    python train.py --variant none|ours|smdebug --interval N --steps S --warmup W --out-dir DIR

`none` runs the loop with no hook; `ours` attaches `sdlocal.hook.pytorch.Hook` configured through a
debughookconfig.json named by SMDEBUG_CONFIG_FILE_PATH (the SageMaker contract); `smdebug`
attaches `smdebug.pytorch.Hook` (run it with the side virtualenv's python). Both hooks save the
same collections. The reported time covers the timed steps plus `hook.close()`, which drains the
background writer: a hook cannot look fast by leaving its work queued.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

import _model

COLLECTIONS = ("weights", "biases", "gradients", "losses")


def _our_hook(out_dir: Path, interval: int) -> Any:
    config = {
        "LocalPath": str(out_dir),
        "HookParameters": {"save_interval": str(interval)},
        "CollectionConfigurations": [{"CollectionName": name} for name in COLLECTIONS],
    }
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    config_path = out_dir.parent / f"{out_dir.name}-debughookconfig.json"
    config_path.write_text(json.dumps(config))
    os.environ["SMDEBUG_CONFIG_FILE_PATH"] = str(config_path)
    from sdlocal.hook.pytorch import Hook

    return Hook.create_from_json_file()


def _smdebug_hook(out_dir: Path, interval: int) -> Any:
    import smdebug.pytorch as smd

    return smd.Hook(
        out_dir=str(out_dir),
        save_config=smd.SaveConfig(save_interval=interval),
        include_collections=list(COLLECTIONS),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--variant", choices=("none", "ours", "smdebug"), required=True)
    parser.add_argument("--interval", type=int, default=1)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--warmup", type=int, default=0)
    parser.add_argument("--out-dir", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    _model.pin_threads()
    model, loss_fn, optimizer, batches = _model.make_workload(args.seed)
    hook = None
    if args.variant != "none":
        if args.out_dir is None:
            parser.error("--out-dir is required with a hook")
        if args.out_dir.exists() and any(args.out_dir.iterdir()):
            parser.error(f"--out-dir {args.out_dir} is not empty: each run needs a fresh trial")
        make = _our_hook if args.variant == "ours" else _smdebug_hook
        hook = make(args.out_dir, args.interval)
        hook.register_module(model)
        hook.register_loss(loss_fn)

    faults_start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    thread_start, process_start = time.thread_time(), time.process_time()  # this (training) thread, all threads
    loop_s, loop_cpu_s, last_loss = _model.train(
        model, loss_fn, optimizer, batches, warmup=args.warmup, steps=args.steps
    )
    close_start, close_cpu_start = time.perf_counter(), time.process_time()
    if hook is not None:
        hook.close()
    close_s, close_cpu_s = time.perf_counter() - close_start, time.process_time() - close_cpu_start
    thread_cpu_s, process_cpu_s = time.thread_time() - thread_start, time.process_time() - process_start
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_start

    result = {
        "variant": args.variant,
        "interval": args.interval,
        "steps": args.steps,
        "warmup": args.warmup,
        "loop_s": loop_s,
        "close_s": close_s,
        "step_ms": 1000.0 * (loop_s + close_s) / args.steps,
        "loop_step_ms": 1000.0 * loop_s / args.steps,
        "cpu_step_ms": 1000.0 * (loop_cpu_s + close_cpu_s) / args.steps,
        # the training thread's CPU time per step over warm-up + timed steps + close, and the other
        # threads' (the hook's writer) over the same span
        "train_thread_cpu_step_ms": 1000.0 * thread_cpu_s / (args.warmup + args.steps),
        "other_threads_cpu_step_ms": 1000.0 * (process_cpu_s - thread_cpu_s) / (args.warmup + args.steps),
        "minor_faults_per_step": faults / (args.warmup + args.steps),  # warm-up included
        "last_loss": last_loss,
        "torch_threads": _model.NUM_THREADS,
        "python": sys.executable,
    }
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
