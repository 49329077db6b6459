"""Benchmarks our hook and trial reader against smdebug 1.0.34, side by side, in one run.

    python benchmarks/run.py            # full run (a few minutes on 2 cores)
    python benchmarks/run.py --quick    # smoke run: a few steps, one round
    python benchmarks/run.py --no-smdebug --quick   # our side only (no side virtualenv needed)
    python benchmarks/run.py --baseline-root /path/to/older/checkout   # + that checkout's hook, same rounds
    python benchmarks/run.py --parts s3  # reads from the embedded S3 and LocalStack (benchmarks/s3_read.py)

Every measurement is its own process: our hook and the no-hook baseline under this python, the
smdebug hook (and a second no-hook baseline) under the side virtualenv's python. Each hooked run
is checked afterwards to have written every due step with every expected tensor. Results go to
benchmarks/results/ as JSON; a markdown report is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import report  # noqa: E402
from benchmarks.errors import BenchmarkError  # noqa: E402
from benchmarks.settings import (  # noqa: E402
    DEFAULT_RESULTS_DIR,
    FULL,
    QUICK,
    REPO_ROOT,
    WORKERS,
    BenchSettings,
    baseline_pythonpath,
    our_python,
    smdebug_python,
)
from benchmarks.verify import check_trial  # noqa: E402
from sdlocal.trial.direct_io import fs_type  # noqa: E402

Log = Callable[[str], None]
SHM_MIN_FREE = 8 << 30  # an interval-1 run writes ~2.7 GB
# With glibc's defaults the 2 MB activation/gradient buffers of every step go back to the kernel
# and are faulted in again, a different number of times in each process (90k to 400k minor faults
# per no-hook run, measured): the no-hook runs then vary by +-25% and hooked runs, whose own
# allocations change glibc's heuristics, can even look faster than no hook. Pinning the two
# thresholds, identically in every variant, removes that noise.
SMDEBUG_NO_DELAY = {"SMDEBUG_TRAINING_END_DELAY_REFRESH": "0"}
PINNED_MALLOC = {"MALLOC_MMAP_THRESHOLD_": str(64 << 20), "MALLOC_TRIM_THRESHOLD_": str(256 << 20)}


def worker_env(side: str, pin_malloc: bool = True) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("SMDEBUG_CONFIG_FILE_PATH", "PYTHONPATH", *PINNED_MALLOC)}
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1")
    if pin_malloc:
        env.update(PINNED_MALLOC)
    if side == "ours":
        env["PYTHONPATH"] = str(REPO_ROOT)  # never on the smdebug side: nothing of ours may leak in
    return env


def run_worker(python: Path, script: str, args: list[str], side: str, timeout_s: float,
               pin_malloc: bool = True, extra_env: dict[str, str] | None = None) -> dict[str, Any]:
    """Runs one worker process to completion (or its deadline); returns the JSON it printed last."""
    cmd = [str(python), str(WORKERS / script), *args]
    env = {**worker_env(side, pin_malloc), **(extra_env or {})}
    try:
        proc = subprocess.run(cmd, env=env, cwd=REPO_ROOT, capture_output=True,
                              text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as e:
        raise BenchmarkError(f"{' '.join(cmd)} did not finish within {timeout_s:.0f} s") from e
    if proc.returncode != 0:
        raise BenchmarkError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    for line in reversed(proc.stdout.splitlines()):  # smdebug logs to stdout too
        if line.startswith("{"):
            return dict(json.loads(line))
    raise BenchmarkError(f"{' '.join(cmd)} printed no result:\n{proc.stdout[-2000:]}")


def pick_work_dir(explicit: Path | None) -> tuple[Path, str]:
    """A tmpfs when there is room (no disk write-back bleeding into the next run), else a temp dir."""
    if explicit is not None:
        explicit = explicit.resolve()  # absolute: a baseline's PYTHONPATH lies in it, used from other folders
        explicit.mkdir(parents=True, exist_ok=True)
        # the file system says how large step files are written (trial/direct_io.py: O_DIRECT on a disk's)
        return Path(tempfile.mkdtemp(prefix="sdlocal-bench-", dir=explicit)), f"{explicit} ({fs_type(explicit)})"
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK) and shutil.disk_usage(shm).free >= SHM_MIN_FREE:
        return Path(tempfile.mkdtemp(prefix="sdlocal-bench-", dir=shm)), "tmpfs (/dev/shm)"
    return Path(tempfile.mkdtemp(prefix="sdlocal-bench-")), "a temporary directory"


def training_configs(settings: BenchSettings, with_smdebug: bool,
                     with_checkout: bool = False) -> list[tuple[str, int]]:
    configs = [("none-ours", 0)] + [("ours", i) for i in settings.intervals]
    if with_checkout:
        configs += [("ours-baseline", i) for i in settings.intervals]
    if with_smdebug:
        configs += [("none-smdebug", 0)] + [("smdebug", i) for i in settings.intervals]
    return configs


def run_training(settings: BenchSettings, side_python: Path | None, work: Path, log: Log,
                 rng: random.Random, pin_malloc: bool = True,
                 baseline_root: Path | None = None) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    configs = training_configs(settings, side_python is not None, baseline_root is not None)
    total_steps = settings.warmup + settings.steps
    for round_no in range(settings.repeats):
        order = configs[:]
        rng.shuffle(order)
        for variant, interval in order:
            side = "smdebug" if variant.endswith("smdebug") else "ours"
            python = side_python if side == "smdebug" else our_python()
            assert python is not None
            hook_variant = "none" if variant.startswith("none") else variant.removesuffix("-baseline")
            out_dir = work / f"train-r{round_no}-{variant}-{interval}"
            args = ["--variant", hook_variant, "--interval", str(max(interval, 1)),
                    "--steps", str(settings.steps), "--warmup", str(settings.warmup), "--out-dir", str(out_dir)]
            # the other checkout's hook: its packages first on the path (the harness stays this one's)
            extra = ({"PYTHONPATH": baseline_pythonpath(baseline_root, work)}
                     if variant == "ours-baseline" and baseline_root else None)
            result = run_worker(python, "train.py", args, side, settings.worker_timeout_s, pin_malloc, extra)
            if hook_variant != "none":
                result.update(check_trial(out_dir, total_steps, interval))
            shutil.rmtree(out_dir, ignore_errors=True)
            (out_dir.parent / f"{out_dir.name}-debughookconfig.json").unlink(missing_ok=True)
            result.update(variant=variant, interval=interval, round=round_no)
            runs.append(result)
            log(f"  round {round_no + 1}/{settings.repeats} {variant:<12} interval {interval:>3}:"
                f" {result['step_ms']:7.2f} ms/step, CPU {result['cpu_step_ms']:7.2f} ms/step,"
                f" {result['minor_faults_per_step']:6.0f} page faults/step"
                + (f" (CPU training thread {result['train_thread_cpu_step_ms']:.2f}, other threads"
                   f" {result['other_threads_cpu_step_ms']:.2f} ms/step)" if "train_thread_cpu_step_ms" in result else ""))
    return runs


def run_reading(settings: BenchSettings, side_python: Path | None, work: Path, log: Log) -> dict[str, Any]:
    writer = "smdebug" if side_python is not None else "ours"
    trial_dir = work / "read-trial"
    python = side_python if side_python is not None else our_python()
    run_worker(python, "train.py", ["--variant", writer, "--interval", "1", "--steps", str(settings.read_steps),
                                    "--out-dir", str(trial_dir)], writer, settings.worker_timeout_s)
    check_trial(trial_dir, settings.read_steps, 1)
    readers = ["ours", "bytes"] + (["smdebug", "smdebug-nodelay"] if side_python is not None else [])
    runs: list[dict[str, Any]] = []
    for round_no in range(settings.read_repeats):
        for reader in readers if round_no % 2 == 0 else readers[::-1]:
            side = "smdebug" if reader.startswith("smdebug") else reader
            reader_python = side_python if side == "smdebug" else our_python()
            assert reader_python is not None
            # smdebug sleeps SMDEBUG_TRAINING_END_DELAY_REFRESH (1 s) once it sees the end marker,
            # whatever the trial's size: timed as users get it, and without the sleep.
            extra = SMDEBUG_NO_DELAY if reader == "smdebug-nodelay" else None
            result = run_worker(reader_python, "read.py", ["--reader", side, str(trial_dir)], side,
                                settings.worker_timeout_s, extra_env=extra)
            result.update(variant=reader, round=round_no)
            runs.append(result)
            log(f"  round {round_no + 1}/{settings.read_repeats} read {reader:<15}: {result['total_s']:.3f} s,"
                f" CPU {result['cpu_s']:.3f} s ({result['values']} values)")
    mismatch = report.check_same_read([r for r in runs if r["variant"] != "bytes"])
    if mismatch is not None:
        raise BenchmarkError(f"the readers disagree on the trial's data: {mismatch}")
    return {"trial_writer": writer, "trial_steps": settings.read_steps, "same_data": True,
            "runs": runs, "summary": report.summarize_reading(runs)}


PARTS = ("train", "read", "reader", "s3")


def localstack_image_present(image: str) -> bool:
    """Whether a Docker engine answers and holds `image` (the launcher's image_exists; no engine: False)."""
    from docker.errors import DockerException

    from sdlocal.launcher.images.build import image_exists

    try:
        return image_exists(image)
    except (DockerException, OSError):
        return False


def run_s3_part(quick: bool, side_python: Path | None, work: Path, log: Log, localstack: bool) -> dict[str, Any]:
    """benchmarks/s3_read.py in its own process (it runs servers and a container): its lines go to
    the log as they come; its JSON line and its tables become this part's results."""
    from benchmarks.s3_read import LOCALSTACK_IMAGE

    args = [sys.executable, str(REPO_ROOT / "benchmarks" / "s3_read.py"), "--work-dir", str(work / "s3")]
    # a smoke run: s3_read.py's own covers the hook's trial; a full one reads 490 small values per trial
    # (smdebug makes a boto3 client per GET: 5 s a read, 24 of them)
    args += ["--quick", "--hook-steps", "0"] if quick else ["--small-steps", "10"]
    args += ["--smdebug-python", str(side_python)] if side_python is not None else ["--no-smdebug"]
    with_localstack = localstack and localstack_image_present(LOCALSTACK_IMAGE)
    args += ["--localstack"] if with_localstack else []
    proc = subprocess.Popen(args, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    assert proc.stdout is not None
    for line in proc.stdout:
        line = line.rstrip("\n")
        lines.append(line)
        if not line.startswith("{"):
            log(line)
    if proc.wait() != 0 or not lines or not lines[-1].startswith("{"):
        raise BenchmarkError(f"benchmarks/s3_read.py failed (exit {proc.returncode}): {lines[-3:]}")
    result = json.loads(lines[-1])
    tables: list[list[str]] = []  # each run of consecutive table lines is one table
    for before, line in zip([""] + lines[:-1], lines, strict=True):
        if line.startswith("|"):
            if not before.startswith("|"):
                tables.append([])
            tables[-1].append(line)
    result["markdown"] = ("Reads from S3 (benchmarks/s3_read.py): the embedded S3"
                          + (" and LocalStack" if with_localstack else "") + ", large then small values.\n\n"
                          + "\n\n".join("\n".join(t) for t in tables) + "\n")
    result["localstack"] = with_localstack
    return dict(result)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a few steps, one round: a smoke run")
    parser.add_argument("--no-smdebug", action="store_true", help="our side only (no side virtualenv)")
    parser.add_argument("--parts", default=",".join(PARTS),
                        help="comma-separated: train (the hook's step time), read (one 50-step trial of the"
                             " training model), reader (small and large tensors, both writers, ours, ours through"
                             " smdebug's API and smdebug: benchmarks/reader.py), s3 (the same from the embedded S3"
                             " and LocalStack: benchmarks/s3_read.py); default all")
    parser.add_argument("--no-localstack", action="store_true",
                        help="s3 part: not from LocalStack even where its image and a Docker engine are there")
    parser.add_argument("--large-steps", type=int, help="reader part: 64 MiB values per large trial (default 8)")
    parser.add_argument("--reader-rounds", type=int, help="reader part: rounds (default 3)")
    parser.add_argument("--smdebug-python", help="the side virtualenv's python (default $SDLOCAL_SMDEBUG_PYTHON)")
    parser.add_argument("--results-dir", type=Path, default=DEFAULT_RESULTS_DIR)
    parser.add_argument("--work-dir", type=Path, help="where trials are written (default a tmpfs)")
    parser.add_argument("--steps", type=int)
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--seed", type=int, default=0, help="seed of the run order shuffle")
    parser.add_argument("--baseline-root", type=Path,
                        help="a checkout whose hook runs too, as 'ours-baseline', in the same rounds")
    parser.add_argument("--default-malloc", action="store_true",
                        help="leave glibc's malloc thresholds alone (noisier: see PINNED_MALLOC)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None, log: Log = print) -> int:
    args = parse_args(argv)
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    if not parts <= set(PARTS) or not parts:
        raise SystemExit(f"--parts: expected some of {', '.join(PARTS)}, got {args.parts!r}")
    settings = (QUICK if args.quick else FULL).with_overrides(steps=args.steps, repeats=args.repeats)
    side_python = None if args.no_smdebug else smdebug_python(args.smdebug_python)
    if not args.no_smdebug and (side_python is None or not side_python.exists()):
        raise SystemExit("no smdebug side virtualenv found: pass --smdebug-python or $SDLOCAL_SMDEBUG_PYTHON,"
                         " or --no-smdebug for our side only")
    if args.baseline_root is not None and not (args.baseline_root / "hook" / "pytorch.py").is_file():
        raise SystemExit(f"--baseline-root {args.baseline_root}: no hook/pytorch.py there")
    work, work_kind = pick_work_dir(args.work_dir)
    results: dict[str, Any] = {
        "settings": asdict(settings),
        "machine": {"cpus": os.cpu_count(), "loadavg_start": os.getloadavg(), "work_dir_kind": work_kind,
                    "malloc": "default" if args.default_malloc else PINNED_MALLOC,
                    "our_python": str(our_python()), "smdebug_python": str(side_python) if side_python else None,
                    "baseline_root": str(args.baseline_root) if args.baseline_root else None},
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    started = time.perf_counter()
    try:
        if "train" in parts:
            log(f"training step time ({settings.mode}): {settings.repeats} round(s), torch threads = 1")
            runs = run_training(settings, side_python, work, log, random.Random(args.seed),
                                not args.default_malloc, args.baseline_root)
            results["training"] = {"runs": runs, "summary": report.summarize_training(runs, settings.intervals)}
        if "read" in parts:
            log(f"reading every tensor ({settings.mode}): trial of {settings.read_steps} steps")
            results["reading"] = run_reading(settings, side_python, work, log)
        if "reader" in parts:
            from benchmarks import reader

            log("reader: small and large tensors, trials by both writers")
            results["reader"] = reader.run_part(args.quick, side_python, work, log, args.seed, args.large_steps,
                                                args.reader_rounds)
        if "s3" in parts:
            log("s3: large and small values from the embedded S3" + ("" if args.no_localstack else " and LocalStack"))
            results["s3"] = run_s3_part(args.quick, side_python, work, log, not args.no_localstack)
    except BenchmarkError as e:
        print(f"benchmark failed: {e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results["machine"]["loadavg_end"] = os.getloadavg()
    results["elapsed_s"] = time.perf_counter() - started
    text = report.markdown(results) if "training" in results or "reading" in results else ""
    if "reader" in results:
        from benchmarks import reader_report

        text += "\n" + reader_report.markdown({**results["reader"], "machine": results["machine"]})
    if "s3" in results:
        text += "\n" + results["s3"]["markdown"]
    results["markdown"] = text
    args.results_dir.mkdir(parents=True, exist_ok=True)
    out = args.results_dir / f"bench-{settings.mode}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    out.write_text(json.dumps(results, indent=2, default=str))
    log("")
    log(text)
    log(f"results: {out} ({results['elapsed_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
