"""Where our hook's time goes: cProfile of the training thread and of the background writer
thread, for the benchmark workload at one save interval.

    python benchmarks/profile_hook.py --interval 1 --steps 200 [--top 25]

Prints, per thread, the functions with the most cumulative time, and how long the training thread
waited on a full writer queue. Not a benchmark (profiling slows everything down); a map.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO_ROOT), str(REPO_ROOT / "benchmarks" / "workers")]

import _model  # noqa: E402
import train as train_worker  # noqa: E402


def _stats(profile: cProfile.Profile, top: int) -> str:
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--interval", type=int, default=1)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--work-dir", type=Path, help="where the trial goes (default a tmpfs: /dev/shm)")
    args = parser.parse_args(argv)

    from sdlocal.hook import _async_writer

    writer_profile = cProfile.Profile()
    original_run = _async_writer.AsyncWriter._run

    def profiled_run(self: _async_writer.AsyncWriter) -> None:
        writer_profile.enable()
        try:
            original_run(self)
        finally:
            writer_profile.disable()

    _async_writer.AsyncWriter._run = profiled_run  # type: ignore[method-assign]

    _model.pin_threads()
    model, loss_fn, optimizer, batches = _model.make_workload()
    where = args.work_dir or (Path("/dev/shm") if Path("/dev/shm").is_dir() else None)
    if where is not None:
        where.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=where) as tmp:
        hook = train_worker._our_hook(Path(tmp) / "trial", args.interval)
        hook.register_module(model)
        hook.register_loss(loss_fn)
        main_profile = cProfile.Profile()
        start = time.perf_counter()
        main_profile.enable()
        loop_s, _, _ = _model.train(model, loss_fn, optimizer, batches, warmup=args.warmup, steps=args.steps)
        close_start = time.perf_counter()
        hook.close()
        main_profile.disable()
        close_s = time.perf_counter() - close_start
    print(json.dumps({"interval": args.interval, "steps": args.steps, "loop_step_ms": 1000 * loop_s / args.steps,
                      "close_s": close_s, "wall_s": time.perf_counter() - start}))
    print("=== training thread (warm-up + timed steps + close) ===")
    print(_stats(main_profile, args.top))
    print("=== background writer thread ===")
    print(_stats(writer_profile, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
