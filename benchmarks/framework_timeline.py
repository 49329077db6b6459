"""What the framework timeline costs a training step: the same training with and without a profiler
config, side by side in one run. Target: <= 1 % at default settings.

    python benchmarks/framework_timeline.py [--rounds 9] [--steps 300] [--pairs 120] [--models cnn,mlp] [--quick]

Two measurements, both in every run:
1. In one process (benchmarks/workers/timeline_ab.py): the same model, optimizer and DataLoader,
   alternating blocks of steps with the timeline on and off (hooks and probes attached and
   removed between blocks, outside the timing); per block pair the difference in wall time and in
   the training thread's CPU time per step; the median over the pairs. Slow drifts of a shared
   machine hit both sides of a pair alike, so this resolves a few µs per step. Done twice: without
   a hook config (what profiling costs a job that saves no tensor) and with the SDK's default
   DebugHookConfig (what it adds on top of Debugger's zero-code hook).
2. Separate processes under `python -m sdlocal.hook.run`, the variants below; per run the timed steps'
   wall time, training-thread and process CPU time (the writer thread included) per step.

Variants (no debughookconfig.json in any of them, so the baseline runs no hook at all):
- `off`: no profilerconfig.json (SageMaker without ProfilerConfig; DisableProfiler behaves the same);
- `default`: what sdlocal writes for the SDK's default `ProfilerConfig`: ProfilingParameters with
  the sampling interval only. smdebug's rule: the step timeline is on (Step, Forward, Backward every
  step), no metrics config (no data-loading events);
- `framework-profile`: the SDK's `FrameworkProfile()` defaults (data loading profiled at step 7;
  the detailed and Python profiling configs are accepted and ignored by this hook).
Workloads (benchmarks/workers/timeline_train.py, a real DataLoader, num_workers 0, one torch
thread): `cnn`, a small CNN on 28x28 images (the small training); `mlp`, a tiny MLP whose steps of
about a millisecond show a per-step cost at its largest.

Each run is a fresh process; every round runs every (workload, variant) once in a shuffled order.
Per run the worker reports, over the timed steps: wall time per step, the training thread's CPU
time per step and the whole process's (the timeline's writer thread included). Overhead =
median over rounds of (variant / `off` of the same round) − 1, and of medians; on a shared machine
the paired figure is the steadier. Every profiled run's trace files are read back: exactly one
Step, Forward and Backward event per step (and, for framework-profile, one data-loading batch), else
the benchmark fails. Results: benchmarks/results/timeline-<time>.json and a markdown table.
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
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.errors import BenchmarkError  # noqa: E402
from benchmarks.settings import DEFAULT_RESULTS_DIR, REPO_ROOT, WORKERS  # noqa: E402
from sdlocal.trial.profiler import ProfilerReader  # noqa: E402

PINNED_MALLOC = {"MALLOC_MMAP_THRESHOLD_": str(64 << 20), "MALLOC_TRIM_THRESHOLD_": str(256 << 20)}
VARIANTS = ("off", "default", "framework-profile")
# The SDK's default DebugHookConfig (no collection configured: losses, every 500 steps).
DEFAULT_HOOK_CONFIG = {"HookParameters": {"save_interval": "500"}}
# The SDK's FrameworkProfile() (sagemaker.debugger, profile_default_steps for every metrics config).
SDK_FRAMEWORK_PROFILE = {
    "RotateMaxFileSizeInBytes": "10485760",
    "RotateFileCloseIntervalInSeconds": "60",
    "FileOpenFailThreshold": "50",
    "DetailedProfilingConfig": '{"StartStep": 5, "NumSteps": 1, }',
    "DataloaderProfilingConfig": '{"StartStep": 7, "NumSteps": 1, "MetricsRegex": ".*", }',
    "PythonProfilingConfig": '{"StartStep": 9, "NumSteps": 3, "ProfilerName": "cprofile", "cProfileTimer": "default", }',
    "HorovodProfilingConfig": '{"StartStep": 13, "NumSteps": 1, }',
    "SMDataParallelProfilingConfig": '{"StartStep": 15, "NumSteps": 1, }',
}


def profiler_config(variant: str, local_path: Path) -> dict[str, Any] | None:
    if variant == "off":
        return None
    params = {"ProfilingIntervalInMilliseconds": "500", "LocalPath": str(local_path)}
    if variant == "framework-profile":
        params.update(SDK_FRAMEWORK_PROFILE)
    return {"ProfilingParameters": params, "DisableProfiler": False}


def run_once(model: str, variant: str, steps: int, warmup: int, work: Path) -> dict[str, Any]:
    run_dir = Path(tempfile.mkdtemp(dir=work))
    config = profiler_config(variant, run_dir / "profiler")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SMDEBUG_CONFIG_FILE_PATH")}
    env.update(PINNED_MALLOC, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONHASHSEED="0",
               PYTHONPATH=str(REPO_ROOT), SMDEBUG_CONFIG_FILE_PATH=str(run_dir / "no-debughookconfig.json"),
               SMPROFILER_CONFIG_PATH=str(run_dir / "profilerconfig.json"), SM_CURRENT_HOST="algo-1")
    if config is not None:
        (run_dir / "profilerconfig.json").write_text(json.dumps(config))
    cmd = [sys.executable, "-m", "sdlocal.hook.run", str(WORKERS / "timeline_train.py"), "--model", model,
           "--steps", str(steps), "--warmup", str(warmup)]
    try:
        proc = subprocess.run(cmd, env=env, cwd=run_dir, capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired as e:
        raise BenchmarkError(f"{model}/{variant} did not finish within 900 s") from e
    if proc.returncode != 0:
        raise BenchmarkError(f"{model}/{variant} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    result["events"] = verify(variant, run_dir / "profiler", result["total_steps"])
    return result


def run_ab(model: str, pairs: int, block: int, work: Path, with_hook: bool) -> dict[str, Any]:
    """Measurement 1 (see the module doc): median per-step differences, µs and relative."""
    run_dir = Path(tempfile.mkdtemp(dir=work))
    config = profiler_config("default", run_dir / "profiler")
    (run_dir / "profilerconfig.json").write_text(json.dumps(config))
    cmd = [sys.executable, str(WORKERS / "timeline_ab.py"), "--model", model, "--pairs", str(pairs), "--block",
           str(block), "--config", str(run_dir / "profilerconfig.json"), "--work", str(run_dir)]
    if with_hook:
        (run_dir / "debughookconfig.json").write_text(json.dumps(DEFAULT_HOOK_CONFIG))
        cmd += ["--hook-config", str(run_dir / "debughookconfig.json")]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SMDEBUG_CONFIG_FILE_PATH")}
    env.update(PINNED_MALLOC, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONHASHSEED="0",
               PYTHONPATH=str(REPO_ROOT), SM_CURRENT_HOST="algo-1")
    proc = subprocess.run(cmd, env=env, cwd=run_dir, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise BenchmarkError(f"in-process {model}: exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    steps_on = got["steps_on"] + 2 * pairs  # 2 untimed steps per ON block
    if got["events_written"] != 3 * steps_on:  # Step, Forward, Backward per step: nothing lost
        raise BenchmarkError(f"in-process {model}: {got['events_written']} events for {steps_on} steps")
    out: dict[str, Any] = {"pairs": pairs, "block": block, "with_hook": with_hook}
    for i, key in enumerate(("wall", "cpu")):
        on = [p["on"][i] for p in got["pairs"]]
        off = [p["off"][i] for p in got["pairs"]]
        out[f"{key}_off_ms"] = statistics.median(off)
        out[f"{key}_delta_us"] = statistics.median((a - b) * 1000 for a, b in zip(on, off, strict=True))
        out[f"{key}_overhead"] = statistics.median(a / b - 1 for a, b in zip(on, off, strict=True))
    return out


def ab_report(ab: dict[str, Any]) -> str:
    lines = ["| workload | Debugger hook too | step ms (off) | Δ wall µs/step | Δ wall | train-thread CPU ms (off) "
             "| Δ CPU µs/step | Δ CPU |", "|---|---|---|---|---|---|---|---|"]
    for name, r in ab.items():
        lines.append(f"| {name.split('+')[0]} | {'yes' if r['with_hook'] else 'no'} | {r['wall_off_ms']:.3f} | "
                     f"{r['wall_delta_us']:+.1f} | {r['wall_overhead'] * 100:+.2f} % | {r['cpu_off_ms']:.3f} | "
                     f"{r['cpu_delta_us']:+.1f} | {r['cpu_overhead'] * 100:+.2f} % |")
    return "\n".join(lines)


def verify(variant: str, root: Path, total_steps: int) -> int:
    """The trace files hold exactly what this variant must record (a no-op must not look cheap)."""
    if variant == "off":
        if root.exists():
            raise BenchmarkError(f"off: something was written to {root}")
        return 0
    reader = ProfilerReader(root)
    reader.refresh()
    fw = reader.framework
    steps = fw.steps(mode="TRAIN").step.tolist()
    counts = {p: len(fw.events(phase=p)) for p in ("Forward", "Backward(post-forward)", "DataLoaderIter")}
    want = {"Forward": total_steps, "Backward(post-forward)": total_steps,
            "DataLoaderIter": 1 if variant == "framework-profile" else 0}
    if steps != list(range(total_steps)) or counts != want or reader.damage or list(root.rglob("*.tmp")):
        raise BenchmarkError(f"{variant}: unexpected trace: {len(steps)} steps, {counts}, damage {reader.damage}")
    return len(fw.events())


def summarize(runs: list[dict[str, Any]], models: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for model in models:
        rounds = sorted({r["round"] for r in runs})
        by = {(r["round"], r["variant"]): r for r in runs if r["model"] == model}
        base = [by[(i, "off")] for i in rounds]
        for variant in VARIANTS:
            mine = [by[(i, variant)] for i in rounds]
            row: dict[str, Any] = {"runs": len(mine)}
            for key in ("step_ms", "thread_cpu_ms", "process_cpu_ms"):
                values = [r[key] for r in mine]
                row[key] = statistics.median(values)
                row[f"{key}_min"] = min(values)
                if variant != "off":
                    ratios = [r[key] / b[key] - 1 for r, b in zip(mine, base, strict=True)]
                    row[f"{key}_paired_overhead"] = statistics.median(ratios)
                    row[f"{key}_median_overhead"] = statistics.median(values) / statistics.median(
                        [b[key] for b in base]) - 1
            out[f"{model}/{variant}"] = row
    return out


def report(summary: dict[str, Any]) -> str:
    lines = ["| workload / variant | step ms (median) | overhead (paired) | overhead (medians) "
             "| train-thread CPU ms | overhead (paired) | process CPU ms | overhead (paired) |",
             "|---|---|---|---|---|---|---|---|"]

    def pct(row: dict[str, Any], key: str) -> str:
        v = row.get(key)
        return "—" if v is None else f"{v * 100:+.2f} %"

    for name, row in summary.items():
        lines.append(f"| {name} | {row['step_ms']:.3f} | {pct(row, 'step_ms_paired_overhead')} | "
                     f"{pct(row, 'step_ms_median_overhead')} | {row['thread_cpu_ms']:.3f} | "
                     f"{pct(row, 'thread_cpu_ms_paired_overhead')} | {row['process_cpu_ms']:.3f} | "
                     f"{pct(row, 'process_cpu_ms_paired_overhead')} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--pairs", type=int, default=120, help="block pairs of the in-process measurement")
    p.add_argument("--block", type=int, default=40, help="steps per block of the in-process measurement")
    p.add_argument("--models", default="cnn,mlp")
    p.add_argument("--quick", action="store_true", help="2 rounds of 40 steps, 6 pairs: a smoke run")
    p.add_argument("--results-dir", type=Path, default=DEFAULT_RESULTS_DIR)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.steps, args.warmup, args.pairs, args.block = 2, 40, 10, 6, 10
    models = [m for m in args.models.split(",") if m]
    rng = random.Random(args.seed)
    runs: list[dict[str, Any]] = []
    shm = Path("/dev/shm")
    started = time.time()
    ab: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="timeline-bench-", dir=shm if shm.is_dir() else None) as tmp:
        for model in models:
            for with_hook in (False, True):
                pairs = args.pairs
                r = ab[f"{model}+{'hook' if with_hook else 'nohook'}"] = run_ab(model, pairs, args.block, Path(tmp),
                                                                                 with_hook)
                print(f"in-process {model} hook={with_hook}: Δ CPU {r['cpu_delta_us']:+.1f} µs/step "
                      f"({r['cpu_overhead'] * 100:+.2f} %), Δ wall {r['wall_delta_us']:+.1f} µs/step "
                      f"({r['wall_overhead'] * 100:+.2f} %)", file=sys.stderr, flush=True)
        for i in range(args.rounds):
            plan = [(m, v) for m in models for v in VARIANTS]
            rng.shuffle(plan)
            for model, variant in plan:
                r = run_once(model, variant, args.steps, args.warmup, Path(tmp))
                r.update(round=i, model=model, variant=variant)
                runs.append(r)
                print(f"round {i + 1}/{args.rounds} {model:3s} {variant:17s} {r['step_ms']:.3f} ms/step "
                      f"thread {r['thread_cpu_ms']:.3f} process {r['process_cpu_ms']:.3f} "
                      f"({r['events']} events)", file=sys.stderr, flush=True)
    summary = summarize(runs, models)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    out = args.results_dir / f"timeline-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps({"settings": vars(args) | {"results_dir": str(args.results_dir)},
                               "seconds": time.time() - started, "in_process": ab, "summary": summary,
                               "runs": runs}, indent=1))
    print(f"Framework timeline cost ({os.cpu_count()} CPUs; results {out})\n")
    print(f"In one process, timeline on/off in alternating blocks of {args.block} steps (median over block pairs):\n")
    print(ab_report(ab))
    print(f"\nSeparate processes under hook.run, {args.rounds} rounds x {args.steps} timed steps (+{args.warmup} warm-up):\n")
    print(report(summary))
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except BenchmarkError as e:
        print(f"benchmark failed: {e}", file=sys.stderr)
        raise SystemExit(1) from None
