"""What the ProfilerReport page costs: its size in bytes and the time to render it, by job length.

    python benchmarks/profiler_report.py [--hours 0.17 2 24] [--cores 8] [--gpus 4] [--interval-ms 500]

Each job is made of the series the system monitor writes (per-core CPU and I/O wait, per-GPU
utilization and memory, memory, network, disk) sampled every `--interval-ms`, and TRAIN steps of
about 150 ms with a few slow ones, given to the renderer directly (`ProfilerReportInput`): reading
the files is the reader's benchmark, not this one. The page is checked for every plot before its
size is counted. Target: the size stays about the same whatever the job's length (plots reduce
long series; dense markers are embedded as one PNG).
"""
from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from sdlocal.evaluator.reports import (  # noqa: E402
    JobSummary,
    ProfilerReportInput,
    RuleReport,
    StepDurations,
    SystemData,
    TimeSeries,
    render_profiler_report,
)

T0_US = 1_760_000_040 * 1_000_000


def make_job(hours: float, cores: int, gpus: int, interval_ms: int, seed: int = 3) -> ProfilerReportInput:
    rng = np.random.default_rng(seed)
    n = max(2, int(hours * 3600 * 1000 / interval_ms))
    ts = T0_US + np.arange(n, dtype=np.int64) * interval_ms * 1000

    def series(name: str, mean: float, sd: float, hi: float = 100.0) -> TimeSeries:
        return TimeSeries(name, ts, np.clip(rng.normal(mean, sd, n), 0, hi))

    system = SystemData(
        cpu=tuple(series(f"cpu{c}", 80, 10) for c in range(cores)),
        io_wait=tuple(series(f"cpu{c}", 3, 2) for c in range(cores)),
        gpu=tuple(series(f"gpu{g}", 40, 15) for g in range(gpus)),
        gpu_memory=tuple(series(f"gpu{g}", 30, 1) for g in range(gpus)),
        memory=(series("memory", 60, 5),),
        network=(series("receive", 2e5, 5e4, 1e12), series("transmit", 1e5, 2e4, 1e12)),
        disk=(series("read", 3e6, 1e6, 1e12), series("write", 5e5, 1e5, 1e12)),
    )
    loop_start = T0_US + 60_000_000
    durations = np.maximum(20_000, rng.normal(150_000, 10_000, int((hours * 3600 - 90) / 0.152))).astype(np.int64)
    durations[rng.choice(durations.size, size=min(20, durations.size), replace=False)] *= 6
    starts = loop_start + np.concatenate([[0], np.cumsum(durations[:-1] + 2_000)])
    steps = (StepDurations("TRAIN", starts, durations, np.arange(durations.size)),)
    end = int(ts[-1])
    summary = JobSummary("bench", T0_US, end, int(starts[0]), int(starts[-1] + durations[-1]),
                         {"TRAIN": int(durations.size)}, ("algo-1",), cores, gpus)
    rules = (RuleReport("StepOutlier", 2, 20, int(durations.size), {"stddev": "3"}),
             RuleReport("CPUBottleneck", 0, 0, n))
    return ProfilerReportInput(summary=summary, rules=rules, system=system, steps=steps, generated_us=end)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hours", type=float, nargs="+", default=[10 / 60, 2.0, 24.0])
    ap.add_argument("--cores", type=int, default=8)
    ap.add_argument("--gpus", type=int, default=4)
    ap.add_argument("--interval-ms", type=int, default=500)
    args = ap.parse_args(argv)

    render_profiler_report(make_job(0.05, 2, 1, args.interval_ms))  # imports matplotlib, warms its caches
    print(f"{args.cores} cores, {args.gpus} GPUs, one sample every {args.interval_ms} ms\n")
    print("| job length | samples | steps | HTML size | plots | render time |")
    print("|---|---|---|---|---|---|")
    for hours in args.hours:
        data = make_job(hours, args.cores, args.gpus, args.interval_ms)
        started = time.perf_counter()
        html = render_profiler_report(data)
        seconds = time.perf_counter() - started
        plots = len(re.findall(r"<svg ", html))
        if plots < 9:
            raise SystemExit(f"only {plots} plots in the {hours} h report: not a full page")
        samples = sum(len(s) for s in data.system.cpu + data.system.gpu + data.system.memory)
        length = f"{hours * 60:g} min" if hours < 1 else f"{hours:g} h"
        print(f"| {length} | {samples:,} | {len(data.steps[0]):,} | {len(html) / 1024:,.0f} KiB | {plots} "
              f"| {seconds:.1f} s |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
