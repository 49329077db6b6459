"""Profiler output of made-up but realistic jobs, written with trial.profiler's own writers (the
files the system monitor and the hook write): a CPU-bound training with slow outlier steps and an
evaluation pass now and then, with or without GPU streams."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sdlocal.trial.profiler import Sample, SystemMetricsWriter, TraceWriter

T0 = 1_760_000_040  # on a minute, in UTC


@dataclass(frozen=True)
class JobShape:
    seconds: float = 600.0  # the whole job
    init_s: float = 45.0  # start-up before the first step
    final_s: float = 20.0  # after the last step
    interval_s: float = 0.5  # sampling interval
    cores: int = 4
    gpus: int = 0
    step_s: float = 0.12  # a typical TRAIN step
    outliers: int = 15  # TRAIN steps about 6x slower than the rest
    eval_every: int = 800  # TRAIN steps between evaluation passes of 40 EVAL steps
    seed: int = 7


@dataclass(frozen=True)
class WrittenJob:
    root: Path
    train_steps: int
    eval_steps: int
    outlier_steps: tuple[int, ...]
    start_us: int
    end_us: int
    gpus: int


def write_job(root: Path, shape: JobShape = JobShape()) -> WrittenJob:
    rng = np.random.default_rng(shape.seed)
    root.mkdir(parents=True, exist_ok=True)
    now = [T0 * 1_000_000]
    trace = TraceWriter(root, "0-algo-1", start_time_us=now[0], clock_us=lambda: now[0])

    # ---- the training loop: steps, their phases, slow outliers, evaluation passes ----------------
    loop_start = T0 + shape.init_s
    loop_end = T0 + shape.seconds - shape.final_s
    t = loop_start
    step = 0
    eval_steps = 0
    outlier_at = set(rng.choice(np.arange(50, 3000), size=shape.outliers, replace=False).tolist())
    outliers: list[int] = []
    busy: list[tuple[float, float, str]] = []  # (start, end, mode) to shape the system figures
    while t < loop_end:
        d = max(0.02, rng.normal(shape.step_s, shape.step_s * 0.08))
        if step in outlier_at:
            d *= 6
            outliers.append(step)
        start_us, end_us = int(t * 1e6), int((t + d) * 1e6)
        load_end = start_us + int(0.35 * (end_us - start_us))
        fwd_end = load_end + int(0.25 * (end_us - start_us))
        trace.record("DataLoaderIter", "_MultiProcessingDataLoaderIter.__next__", start_us, load_end,
                     {"num_workers": 2, "pin_memory": False})
        trace.record("Forward", "Net", load_end, fwd_end, {"step_num": step})
        trace.record("Backward(post-forward)", "Net", fwd_end, end_us, {"step_num": step})
        trace.record_step("TRAIN", step, start_us, end_us)
        busy.append((t, t + d, "TRAIN"))
        now[0] = end_us
        trace.close_if_due()
        t += d + 0.002
        step += 1
        if shape.eval_every and step % shape.eval_every == 0:
            for _ in range(40):
                e = max(0.01, rng.normal(shape.step_s * 0.4, shape.step_s * 0.03))
                trace.record_step("EVAL", eval_steps, int(t * 1e6), int((t + e) * 1e6))
                busy.append((t, t + e, "EVAL"))
                eval_steps += 1
                t += e + 0.001
    trace.write_end_marker()

    # ---- system metrics every interval: busy CPU while training, GPU waiting on it -------------
    sysw = SystemMetricsWriter(root)
    n = int(shape.seconds / shape.interval_s)
    starts = np.array([b[0] for b in busy])
    mem = 12.0
    for i in range(n):
        ts = T0 + i * shape.interval_s
        training = loop_start <= ts < t
        k = int(np.searchsorted(starts, ts)) - 1
        slow = training and k >= 0 and busy[k][1] - busy[k][0] > shape.step_s * 3
        samples = []
        for c in range(shape.cores):
            base = (93.0 if c < shape.cores - 1 else 60.0) if training else (25.0 if ts < loop_start else 8.0)
            samples.append(Sample("cpu", f"cpu{c}", "CPUUtilization", float(np.clip(rng.normal(base, 4), 0, 100))))
            samples.append(Sample("cpu", f"cpu{c}", "I/OWaitPercentage",
                                  float(np.clip(rng.normal(30 if slow else 2, 1), 0, 100))))
        mem = min(80.0, mem + (0.08 if training else 0.3 if ts < loop_start else -0.5))
        samples.append(Sample("memory", "MemoryUsedPercent", "", max(5.0, mem)))
        samples.append(Sample("network", "ReceiveBytesPerSecond", "Algorithm", float(abs(rng.normal(
            8e6 if ts < loop_start else 2e5, 5e4)))))
        samples.append(Sample("network", "TransmitBytesPerSecond", "Algorithm", float(abs(rng.normal(1e5, 2e4)))))
        samples.append(Sample("i/o", "ReadThroughputInBytesPerSecond", "", float(abs(rng.normal(
            4e7 if slow else 3e6, 1e6)))))
        samples.append(Sample("i/o", "WriteThroughputInBytesPerSecond", "", float(abs(rng.normal(5e5, 1e5)))))
        for g in range(shape.gpus):
            util = rng.normal(35 + 10 * g, 8) if training else 0.0
            samples.append(Sample("gpu", f"gpu{g}", "GPUUtilization", float(np.clip(util, 0, 100))))
            samples.append(Sample("gpu", f"gpu{g}", "GPUMemoryUtilization",
                                  float(np.clip(20 + 10 * g + (0.01 * i if training else 0), 0, 100))))
        sysw.write(samples, ts)
    sysw.write_end_marker()
    return WrittenJob(root, step, eval_steps, tuple(sorted(outliers)), T0 * 1_000_000,
                      int((T0 + (n - 1) * shape.interval_s) * 1e6), shape.gpus)
