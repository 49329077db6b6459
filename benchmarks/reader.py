"""Reader speed, ours beside smdebug 1.0.34, in one run: many small tensors and large tensors.

    python benchmarks/reader.py              # full run (about 3 minutes on 2 cores)
    python benchmarks/reader.py --quick      # smoke run: small trials, one round
    python benchmarks/reader.py --no-smdebug # our side only (no side virtualenv)
    python benchmarks/reader.py --baseline-root /path/to/older/checkout   # before/after
    python benchmarks/reader.py --smdebug-fast-python PYTHON   # smdebug on a compiled protobuf (default: .venv-smdebug-upb's)

Four trials are written first: `small` (several hundred steps x 49 tensors of at most 32x32
floats: weights, biases, their gradients, the loss of a 12-layer MLP) and `large` (one 128 MiB
float32 weight and the loss per step), each once by our `TrialWriter` and once by smdebug's own hook. Then,
round after round, every reader reads every value of every tensor at every step of every trial,
each run a fresh process (workers/read.py): the time covers create_trial, tensor_names and every
value, not the interpreter's start or the imports; smdebug's 1 s sleep after the end-of-training
marker is timed on its own and taken out (workers/read.py says how). Both readers must read the
same values (count, elements, checksum) from each trial, else the run fails.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import reader_report  # noqa: E402
from benchmarks.errors import BenchmarkError  # noqa: E402
from benchmarks.run import Log, pick_work_dir, run_worker  # noqa: E402
from benchmarks.settings import (  # noqa: E402
    DEFAULT_RESULTS_DIR,
    baseline_pythonpath,
    our_python,
    smdebug_fast_python,
    smdebug_python,
)

SMALL_TENSORS = 49  # workers/write_trial.py: 12 weights, 12 biases, 24 gradients, 1 loss
LARGE_TENSORS = 2  # the large weight and the loss


@dataclass(frozen=True)
class ReaderSettings:
    mode: str
    small_steps: int
    large_steps: int  # 0: no large-tensor trials
    large_rows: int
    large_cols: int
    rounds: int
    worker_timeout_s: float = 600.0

    def __post_init__(self) -> None:
        for name in ("small_steps", "rounds", "large_rows", "large_cols"):
            if getattr(self, name) < 1:
                raise BenchmarkError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.large_steps < 0:
            raise BenchmarkError(f"large_steps must be >= 0, got {self.large_steps}")

    @property
    def large_mib(self) -> float:
        return self.large_rows * self.large_cols * 4 / (1 << 20)


FULL = ReaderSettings(mode="full", small_steps=300, large_steps=3, large_rows=4096, large_cols=8192, rounds=5)
QUICK = ReaderSettings(mode="quick", small_steps=20, large_steps=1, large_rows=512, large_cols=1024, rounds=1)


# what benchmarks/run.py runs: the figures of issue 30 (24 x 64 MiB there; 8 x 64 MiB by default here,
# 512 MiB a trial and 4 trials in memory at once on a shared VM; --large-steps 24 for the full set)
IN_RUN = ReaderSettings(mode="full", small_steps=300, large_steps=8, large_rows=4096, large_cols=4096, rounds=3)


def run_part(quick: bool, side_python: Path | None, work: Path, log: Log, seed: int,
             large_steps: int | None = None, rounds: int | None = None) -> dict[str, Any]:
    """The reader benchmark as a part of benchmarks/run.py: the trials written under `work`, every
    reader (ours, ours through smdebug's API, smdebug, and smdebug on upb where its side virtualenv
    is there) in shuffled order each round; the settings, runs, summary and markdown."""
    settings = replace(QUICK if quick else IN_RUN,
                       **{k: v for k, v in {"large_steps": large_steps, "rounds": rounds}.items() if v is not None})
    fast_python = smdebug_fast_python() if side_python is not None else None
    readers = (["ours", "facade"] + (["smdebug"] if side_python is not None else [])
               + (["smdebug-fast"] if fast_python is not None else []))
    trials = write_trials(settings, side_python, work, log)
    runs = run_reading(settings, trials, readers, side_python, None, log, random.Random(seed), fast_python)
    for path in trials.values():
        shutil.rmtree(path, ignore_errors=True)
    mismatch = reader_report.check_same_values(runs)
    if mismatch is not None:
        raise BenchmarkError(f"the readers disagree: {mismatch}")
    summary = reader_report.summarize(runs)
    return {"settings": asdict(settings), "runs": runs, "summary": summary}


def expected_values(workload: str, s: ReaderSettings) -> int:
    return s.small_steps * SMALL_TENSORS if workload == "small" else s.large_steps * LARGE_TENSORS


def write_trials(s: ReaderSettings, side_python: Path | None, work: Path, log: Log) -> dict[tuple[str, str], Path]:
    """(workload, writer) -> trial directory."""
    trials = {}
    workloads = [("small", s.small_steps)] + ([("large", s.large_steps)] if s.large_steps else [])
    writers = ["ours"] + (["smdebug"] if side_python is not None else [])
    for workload, steps in workloads:
        for writer in writers:
            out = work / f"{workload}-{writer}"
            python = side_python if writer == "smdebug" else our_python()
            assert python is not None
            result = run_worker(python, "write_trial.py",
                                ["--writer", writer, "--workload", workload, "--steps", str(steps),
                                 "--rows", str(s.large_rows), "--cols", str(s.large_cols), "--out-dir", str(out)],
                                writer, s.worker_timeout_s)
            log(f"  wrote {workload:<5} trial with {writer:<7}'s writer: {steps} steps in {result['write_s']:.1f} s")
            trials[(workload, writer)] = out
    return trials


def read_once(reader: str, trial_dir: Path, side_python: Path | None, baseline_root: Path | None,
              timeout_s: float, fast_python: Path | None = None, huge_pages: bool = True) -> dict[str, Any]:
    extra = {} if huge_pages else {"SDLOCAL_BENCH_THP": "off"}
    if reader in ("smdebug", "smdebug-fast"):
        python = side_python if reader == "smdebug" else fast_python
        assert python is not None
        return run_worker(python, "read.py", ["--reader", "smdebug", str(trial_dir)], "smdebug", timeout_s,
                          extra_env=extra)
    if reader == "ours-baseline" and baseline_root:
        extra["PYTHONPATH"] = baseline_pythonpath(baseline_root)
    return run_worker(our_python(), "read.py", ["--reader", "facade" if reader == "facade" else "ours", str(trial_dir)],
                      "ours", timeout_s, extra_env=extra)


def run_reading(s: ReaderSettings, trials: dict[tuple[str, str], Path], readers: list[str],
                side_python: Path | None, baseline_root: Path | None, log: Log,
                rng: random.Random, fast_python: Path | None = None, huge_pages: bool = True) -> list[dict[str, Any]]:
    runs = []
    for round_no in range(s.rounds):
        for (workload, writer), path in trials.items():
            # A shuffled order each time: on this VM a run's time depends on what ran just before
            # it (a process that allocated and freed 400 MB makes the next one's fresh memory
            # slower or faster, measured), so no reader may keep one place in the sequence.
            order = readers[:]
            rng.shuffle(order)
            for reader in order:
                result = read_once(reader, path, side_python, baseline_root, s.worker_timeout_s, fast_python,
                                   huge_pages)
                result.update(workload=workload, writer=writer, variant=reader, round=round_no)
                if result["values"] != expected_values(workload, s):
                    raise BenchmarkError(f"{reader} read {result['values']} values from the {workload} trial"
                                         f" written by {writer}; expected {expected_values(workload, s)}")
                runs.append(result)
                extra = f" (+{result['slept_s']:.2f} s asleep)" if result["slept_s"] > 0.001 else ""
                log(f"  round {round_no + 1}/{s.rounds} {workload:<5} by {writer:<7} read by {reader:<13}:"
                    f" {result['read_s']:.3f} s{extra}, CPU {result['cpu_s']:.3f} s")
    return runs


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small trials, one round: a smoke run")
    parser.add_argument("--no-smdebug", action="store_true", help="our side only (no side virtualenv)")
    parser.add_argument("--smdebug-python", help="the side virtualenv's python (default $SDLOCAL_SMDEBUG_PYTHON)")
    parser.add_argument("--smdebug-fast-python", type=Path, default=smdebug_fast_python(),
                        help="a second smdebug 1.0.34 side virtualenv on a compiled protobuf (upb: made by"
                             " `python benchmarks/smdebug_upb.py --make`), read as 'smdebug-fast' (default"
                             " $SDLOCAL_SMDEBUG_FAST_PYTHON, else .venv-smdebug-upb when it is there)")
    parser.add_argument("--no-smdebug-fast", action="store_true", help="no smdebug-fast reader, even where its"
                        " virtualenv is there")
    parser.add_argument("--no-huge-pages", action="store_true",
                        help="readers run without transparent huge pages (prctl PR_SET_THP_DISABLE): fresh"
                             " memory in 4 KiB pages, as on a host with none to give")
    parser.add_argument("--baseline-root", type=Path,
                        help="a checkout whose trial/ package is read as a third reader, 'ours-baseline'")
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--small-steps", type=int)
    parser.add_argument("--large-steps", type=int, help="0: no large-tensor trials")
    parser.add_argument("--seed", type=int, default=0, help="seed of the reading order shuffle")
    parser.add_argument("--results-dir", type=Path, default=DEFAULT_RESULTS_DIR)
    parser.add_argument("--work-dir", type=Path, help="where trials are written (default a tmpfs)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None, log: Log = print) -> int:
    args = parse_args(argv)
    base = QUICK if args.quick else FULL
    overrides = {"rounds": args.rounds, "small_steps": args.small_steps, "large_steps": args.large_steps}
    try:
        settings = replace(base, **{k: v for k, v in overrides.items() if v is not None})
    except BenchmarkError as e:
        raise SystemExit(str(e)) from None
    side_python = None if args.no_smdebug else smdebug_python(args.smdebug_python)
    if not args.no_smdebug and (side_python is None or not side_python.exists()):
        raise SystemExit("no smdebug side virtualenv found: pass --smdebug-python or $SDLOCAL_SMDEBUG_PYTHON,"
                         " or --no-smdebug for our side only")
    if args.baseline_root is not None and not (args.baseline_root / "trial" / "trial.py").is_file():
        raise SystemExit(f"--baseline-root {args.baseline_root}: no trial/trial.py there")
    if args.smdebug_fast_python is not None and not Path(args.smdebug_fast_python).exists():
        raise SystemExit(f"--smdebug-fast-python {args.smdebug_fast_python}: not found")
    fast_python = (Path(args.smdebug_fast_python)
                   if args.smdebug_fast_python and not args.no_smdebug and not args.no_smdebug_fast else None)
    readers = (["ours", "facade"] + (["ours-baseline"] if args.baseline_root else []) + (["smdebug"] if side_python else [])
               + (["smdebug-fast"] if fast_python else []))
    work, work_kind = pick_work_dir(args.work_dir)
    results: dict[str, Any] = {
        "settings": asdict(settings),
        "machine": {"cpus": os.cpu_count(), "loadavg_start": os.getloadavg(), "work_dir_kind": work_kind,
                    "our_python": str(our_python()), "smdebug_python": str(side_python) if side_python else None,
                    "smdebug_fast_python": str(fast_python) if fast_python else None,
                    "huge_pages": not args.no_huge_pages,
                    "baseline_root": str(args.baseline_root) if args.baseline_root else None},
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    started = time.perf_counter()
    try:
        log(f"reader benchmark ({settings.mode}): writing the trials to {work_kind}")
        trials = write_trials(settings, side_python, work, log)
        log(f"reading every value, {settings.rounds} round(s), readers: {', '.join(readers)}")
        runs = run_reading(settings, trials, readers, side_python, args.baseline_root, log, random.Random(args.seed),
                           fast_python, not args.no_huge_pages)
        mismatch = reader_report.check_same_values(runs)
        if mismatch is not None:
            raise BenchmarkError(f"the readers disagree: {mismatch}")
    except BenchmarkError as e:
        print(f"benchmark failed: {e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results["runs"] = runs
    results["summary"] = reader_report.summarize(runs)
    results["machine"]["loadavg_end"] = os.getloadavg()
    results["elapsed_s"] = time.perf_counter() - started
    text = reader_report.markdown(results)
    results["markdown"] = text
    args.results_dir.mkdir(parents=True, exist_ok=True)
    out = args.results_dir / f"reader-{settings.mode}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    out.write_text(json.dumps(results, indent=2, default=str))
    log("")
    log(text)
    log(f"results: {out} ({results['elapsed_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
