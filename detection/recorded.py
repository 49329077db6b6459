"""Recorded system-metric streams with known GPU faults (no GPU is lent to the detection suite).

Each stream is written through `sdlocal.trial.profiler.SystemMetricsWriter`, so its files are SageMaker's
own format and layout (`system/incremental/<hour>/<start>.algo-1.json`, one file a minute, as the
platform's sampler writes them), for one node with 4 CPU cores and 4 GPUs sampled every 500 ms,
1,200 instants (10 minutes: past the GPU rules' default patience of 1,000 datapoints), then the
end markers. Figures are drawn around the levels below with Gaussian noise (numpy, seeded) and
clipped to 0-100 %. There is no framework trace: the framework rules have no data on them.

- rec_healthy: every GPU busy (88 ± 4 %), GPU memory steady (60 ± 1 %), CPU cores at 55 ± 10 %,
  I/O wait 1 ± 0.5 %: no profiler rule may fire;
- rec_idle_gpu: as healthy, but gpu3 idles (2 ± 1.5 %) → LoadBalancing;
- rec_memory_leak: as healthy, but gpu0's memory grows 1 percentage point a sample from sample
  1,050 until 95 % (10 points per GPUMemoryIncrease window of 10 samples) → GPUMemoryIncrease;
- rec_low_util: GPUs at 25 ± 5 %, memory 20 ± 1 %, CPU 20 ± 5 % (spare everywhere) →
  LowGPUUtilization, BatchSize;
- rec_cpu_bound: every core at 95 ± 2 %, GPUs at 4 ± 2 % → CPUBottleneck;
- rec_io_bound: I/O wait 70 ± 5 % on every core, CPU 30 ± 5 %, GPUs at 4 ± 2 % → IOBottleneck.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sdlocal.trial.profiler import Sample, SystemMetricsWriter
from sdlocal.trial.profiler.names import FRAMEWORK_END_MARKER

START_S = 1_767_225_600.0  # 2026-01-01 00:00:00 UTC: the streams' first instant
INTERVAL_S = 0.5
INSTANTS = 1200
CORES = 4
GPUS = 4


@dataclass
class Levels:
    """Each figure per instant (rows) and core or GPU (columns)."""

    cpu: np.ndarray
    io_wait: np.ndarray
    gpu: np.ndarray
    gpu_memory: np.ndarray


def _noisy(rng: np.random.Generator, mean: float, std: float, columns: int) -> np.ndarray:
    return np.clip(rng.normal(mean, std, size=(INSTANTS, columns)), 0.0, 100.0)


def healthy_levels(rng: np.random.Generator) -> Levels:
    return Levels(cpu=_noisy(rng, 55, 10, CORES), io_wait=_noisy(rng, 1, 0.5, CORES),
                  gpu=_noisy(rng, 88, 4, GPUS), gpu_memory=_noisy(rng, 60, 1, GPUS))


def idle_gpu(rng: np.random.Generator) -> Levels:
    levels = healthy_levels(rng)
    levels.gpu[:, 3] = _noisy(rng, 2, 1.5, 1)[:, 0]
    return levels


LEAK_START = 1050


def memory_leak(rng: np.random.Generator) -> Levels:
    levels = healthy_levels(rng)
    growth = np.clip(np.arange(INSTANTS) - LEAK_START, 0, None).astype(float)
    levels.gpu_memory[:, 0] = np.minimum(levels.gpu_memory[:, 0] + growth, 95.0)
    return levels


def low_util(rng: np.random.Generator) -> Levels:
    return Levels(cpu=_noisy(rng, 20, 5, CORES), io_wait=_noisy(rng, 1, 0.5, CORES),
                  gpu=_noisy(rng, 25, 5, GPUS), gpu_memory=_noisy(rng, 20, 1, GPUS))


def cpu_bound(rng: np.random.Generator) -> Levels:
    levels = healthy_levels(rng)
    levels.cpu = _noisy(rng, 95, 2, CORES)
    levels.gpu = _noisy(rng, 4, 2, GPUS)
    return levels


def io_bound(rng: np.random.Generator) -> Levels:
    levels = healthy_levels(rng)
    levels.cpu = _noisy(rng, 30, 5, CORES)
    levels.io_wait = _noisy(rng, 70, 5, CORES)
    levels.gpu = _noisy(rng, 4, 2, GPUS)
    return levels


def write_stream(levels: Levels, profiler_dir: Path) -> int:
    """Write `levels` as the system metrics of node algo-1 under `profiler_dir`, one file a
    minute, then both end markers; returns the lines written."""
    writer = SystemMetricsWriter(profiler_dir, close_interval_s=60)
    lines = 0
    for i in range(INSTANTS):
        ts = START_S + i * INTERVAL_S
        samples = [Sample("cpu", f"cpu{c}", "CPUUtilization", float(levels.cpu[i, c])) for c in range(CORES)]
        samples += [Sample("cpu", f"cpu{c}", "I/OWaitPercentage", float(levels.io_wait[i, c])) for c in range(CORES)]
        samples.append(Sample("memory", "MemoryUsedPercent", "", 35.0))
        for g in range(GPUS):
            samples.append(Sample("gpu", f"gpu{g}", "GPUUtilization", float(levels.gpu[i, g])))
            samples.append(Sample("gpu", f"gpu{g}", "GPUMemoryUtilization", float(levels.gpu_memory[i, g])))
        lines += writer.write(samples, ts)
        writer.close_if_due(ts)
    writer.write_end_marker()
    end = profiler_dir / FRAMEWORK_END_MARKER  # the platform writes both after its last upload
    end.parent.mkdir(parents=True, exist_ok=True)
    end.write_bytes(b"")
    return lines


def record(build: Callable[[np.random.Generator], Levels], seed: int, run: Path) -> dict[str, float]:
    """Write the stream `build` draws with `seed` as `run/profiler-output`; returns its figures."""
    levels = build(np.random.default_rng(seed))
    lines = write_stream(levels, run / "profiler-output")
    return {"lines": float(lines), "gpu_mean": float(levels.gpu.mean()), "cpu_mean": float(levels.cpu.mean())}
