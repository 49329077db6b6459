"""What the system monitor costs: CPU time of the sampler at ProfilingIntervalInMilliseconds=500
(the SDK's default), as a share of one core. Target: <= 0.5 %.

    python benchmarks/sysmetrics.py [--seconds 60] [--interval-ms 500] [--docker]

Two figures per collector:
- live: the sampler thread runs on its real 500 ms schedule for `--seconds`; its CPU time (sampling
  and writing, `time.thread_time` around each sample) and the whole process's CPU time
  (`os.times`: wakeups and the thread itself included; this script does nothing else meanwhile)
  over the wall time;
- per sample: `--burst` back-to-back samples (same code path), mean CPU µs per sample, and what that
  costs at the interval.
`--docker` also measures the container collector on a container of a local image (started with
`sleep`, removed afterwards). The files written are read back to check that the sampler wrote what
it counted (a benchmark of a no-op would be worthless).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from sdlocal.launcher.sampler.sampler import (  # noqa: E402
    Collector,
    CompositeCollector,
    ContainerCollector,
    HostCollector,
    SystemSampler,
    open_gpu_collector,
)
from sdlocal.trial.profiler import ProfilerReader, SystemMetricsWriter  # noqa: E402


def _process_cpu() -> float:
    t = os.times()
    return t.user + t.system


def measure(name: str, collector: Collector, seconds: float, interval_s: float, burst: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        sampler = SystemSampler(collector, SystemMetricsWriter(tmp), interval_s)
        cpu0, wall0 = _process_cpu(), time.monotonic()
        sampler.start()
        time.sleep(seconds)
        sampler.stop()
        wall = time.monotonic() - wall0
        process_cpu = _process_cpu() - cpu0
        live = {"samples": sampler.samples, "lines": sampler.lines, "thread_cpu_s": sampler.cpu_seconds,
                "process_cpu_s": process_cpu, "wall_s": wall}
        reader = ProfilerReader(tmp)
        reader.refresh()
        if len(reader.system) != sampler.lines or reader.damage:
            raise SystemExit(f"{name}: the files hold {len(reader.system)} lines, the sampler wrote {sampler.lines}")

    with tempfile.TemporaryDirectory() as tmp:
        sampler = SystemSampler(collector, SystemMetricsWriter(tmp), interval_s)
        t0 = time.thread_time()
        for _ in range(burst):
            sampler.sample_once()
        per_sample = (time.thread_time() - t0) / burst
        sampler.writer.close()
    collector.close()
    return {"name": name, "live": live, "per_sample_us": per_sample * 1e6,
            "lines_per_sample": live["lines"] / max(1, live["samples"])}


def report(r: dict[str, Any], interval_s: float) -> str:
    live = r["live"]
    thread_pct = 100.0 * live["thread_cpu_s"] / live["wall_s"]
    process_pct = 100.0 * live["process_cpu_s"] / live["wall_s"]
    burst_pct = 100.0 * r["per_sample_us"] / 1e6 / interval_s
    return (f"| {r['name']} | {live['samples']} | {r['lines_per_sample']:.0f} | {thread_pct:.3f} % | "
            f"{process_pct:.3f} % | {r['per_sample_us']:.0f} µs | {burst_pct:.3f} % |")


def _container(image: str) -> Any:
    import docker

    client = docker.from_env(timeout=30)
    return client.containers.run(image, entrypoint="sleep", command=["600"], detach=True,
                                 labels={"sdlocal.bench": "sysmetrics"})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--interval-ms", type=int, default=500)
    ap.add_argument("--burst", type=int, default=400)
    ap.add_argument("--docker", action="store_true", help="also measure the container collector")
    args = ap.parse_args(argv)
    interval = args.interval_ms / 1000.0

    collectors: list[tuple[str, Any]] = []
    gpu, why = open_gpu_collector()
    host: Collector = HostCollector() if gpu is None else CompositeCollector([HostCollector(), gpu])
    collectors.append(("host" + ("" if gpu is None else " + NVML"), host))
    container = None
    if args.docker:
        from sdlocal.launcher.images.build import evaluator_image

        container = _container(evaluator_image())
        container.reload()
        collectors.append(("container (cgroup)", ContainerCollector(container.attrs["State"]["Pid"])))
    try:
        print(f"System monitor cost at {args.interval_ms} ms, {args.seconds:.0f} s live, "
              f"{args.burst} back-to-back samples; {os.cpu_count()} cores; GPU: {'yes' if gpu else why}\n")
        print("| collector | samples | lines/sample | sampler thread CPU | process CPU | CPU per sample | "
              "per sample × rate |")
        print("|---|---|---|---|---|---|---|")
        for name, c in collectors:
            print(report(measure(name, c, args.seconds, interval, args.burst), interval), flush=True)
    finally:
        if container is not None:
            container.remove(force=True)
    print("\nTarget: the sampler thread's CPU <= 0.5 % of one core.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
