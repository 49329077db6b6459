"""What the zero-code hook costs a Hugging Face Trainer job (issue 27, item 8).

    python benchmarks/hf_trainer.py [--rounds 7] [--steps 300] [--quick]

A tiny BERT (benchmarks/workers/hf_train.py: built from a config, 2 layers, hidden 128, batch 16,
CPU, 1 thread), run unchanged under `python -m sdlocal.hook.run`: without a hook config (hook off),
and with the zero-code hook saving `weights, biases, gradients, losses` at save_interval 10 and
100. Each run is a fresh process; each round runs the three in a shuffled order; the ratio of a
round is hooked ÷ off of that round (runs close in time on a shared machine), and the report gives
the median ratio over rounds, with the medians of ms per step; the same for the process's CPU time
(the hook's writer thread included), steadier than wall time on a shared machine. After each hooked run the trial is
checked: every due TRAIN step (each optimizer step is one) holds the loss and the gradients.
Targets: x1.07 at interval 10 (TrainCheck's published median overhead), <= x1.02 at 100.
Prints a markdown table, then one JSON line.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from sdlocal.trial import create_trial  # noqa: E402
from sdlocal.trial.modes import ModeKeys  # noqa: E402

WORKER = REPO / "benchmarks" / "workers" / "hf_train.py"
INTERVALS = (10, 100)
TARGETS = {10: 1.07, 100: 1.02}


class BenchmarkFailed(Exception):
    pass


def _run(work: Path, interval: int | None, steps: int, warmup: int) -> tuple[float, float]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    config = work / f"config-{interval}.json"
    out = work / f"trial-{interval}"
    if interval is not None:
        config.write_text(json.dumps({
            "LocalPath": str(out), "HookParameters": {"save_interval": str(interval)},
            "CollectionConfigurations": [{"CollectionName": c} for c in ("weights", "biases", "gradients", "losses")]}))
    env["SMDEBUG_CONFIG_FILE_PATH"] = str(config)  # absent: the hook is off
    proc = subprocess.run([sys.executable, "-m", "sdlocal.hook.run", str(WORKER), "--steps", str(steps),
                           "--warmup", str(warmup), "--out", str(work / "hf-out")],
                          cwd=work, env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise BenchmarkFailed(f"run at interval {interval} failed: {proc.stderr[-2000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if interval is not None:
        _check(out, interval, steps + warmup)
        subprocess.run(["rm", "-rf", str(out)], check=True)
    return float(result["ms_per_step"]), float(result["cpu_ms_per_step"])


def _check(out: Path, interval: int, total: int) -> None:
    trial = create_trial(out)
    due = list(range(0, total, interval))
    if trial.steps(mode=ModeKeys.TRAIN) != due:
        raise BenchmarkFailed(f"interval {interval}: TRAIN steps {trial.steps(mode=ModeKeys.TRAIN)[:5]}..., "
                              f"expected {due[:5]}...")
    grads = trial.tensor_names(collection="gradients")
    if "loss_output_0" not in trial.tensor_names(collection="losses") or len(grads) < 30:
        raise BenchmarkFailed(f"interval {interval}: no loss or too few gradients ({len(grads)})")
    if trial.tensor("loss_output_0").steps() != due or trial.tensor(grads[0]).steps() != due:
        raise BenchmarkFailed(f"interval {interval}: the loss or gradients miss due steps")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="1 round of 20 steps: a smoke run")
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.steps, args.warmup = 1, 20, 2
    rng = random.Random(args.seed)
    variants: list[int | None] = [None, *INTERVALS]
    ms: dict[Any, list[float]] = {v: [] for v in variants}
    cpu: dict[Any, list[float]] = {v: [] for v in variants}
    ratios: dict[int, list[float]] = {i: [] for i in INTERVALS}
    cpu_ratios: dict[int, list[float]] = {i: [] for i in INTERVALS}
    with tempfile.TemporaryDirectory(prefix="hf-bench-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as d:
        for _ in range(args.rounds):
            order = variants[:]
            rng.shuffle(order)
            this = {v: _run(Path(d), v, args.steps, args.warmup) for v in order}
            for v, (t, c) in this.items():
                ms[v].append(t)
                cpu[v].append(c)
            for i in INTERVALS:
                ratios[i].append(this[i][0] / this[None][0])
                cpu_ratios[i].append(this[i][1] / this[None][1])
    result = {"rounds": args.rounds, "steps": args.steps,
              "ms_per_step": {str(v): statistics.median(t) for v, t in ms.items()},
              "ratio": {str(i): statistics.median(r) for i, r in ratios.items()},
              "ratios": {str(i): r for i, r in ratios.items()},
              "cpu_ms_per_step": {str(v): statistics.median(t) for v, t in cpu.items()},
              "cpu_ratio": {str(i): statistics.median(r) for i, r in cpu_ratios.items()},
              "target": {str(i): t for i, t in TARGETS.items()}}
    print(f"Hugging Face Trainer, tiny BERT, {args.steps} timed steps, {args.rounds} rounds (medians)\n")
    print("| hook | ms/step | hooked ÷ off (paired) | CPU ms/step | CPU hooked ÷ off (paired) | target |")
    print("|---|---|---|---|---|---|")
    print(f"| off | {result['ms_per_step']['None']:.2f} | | {result['cpu_ms_per_step']['None']:.2f} | | |")
    for i in INTERVALS:
        print(f"| save_interval {i} | {result['ms_per_step'][str(i)]:.2f} | x{result['ratio'][str(i)]:.3f} "
              f"| {result['cpu_ms_per_step'][str(i)]:.2f} | x{result['cpu_ratio'][str(i)]:.3f} | <= x{TARGETS[i]} |")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except BenchmarkFailed as e:
        print(f"hf_trainer benchmark: {e}", file=sys.stderr)
        raise SystemExit(1) from None
