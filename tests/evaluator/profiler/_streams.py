"""Profiler outputs for the profiler rules' tests, written with trial.profiler's own writers (the
files the sampler and the hook write): system samples with known faults (this machine has no GPU:
GPU streams are written as NVML would report them) and framework trace events, at explicit times."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from sdlocal.evaluator.profiler_trial import ProfilerTrial
from sdlocal.trial.profiler import Sample, SystemMetricsWriter, TraceWriter
from sdlocal.trial.profiler.names import (
    CPU_TYPE,
    CPU_UTILIZATION,
    GPU_MEMORY_UTILIZATION,
    GPU_TYPE,
    GPU_UTILIZATION,
    IO_WAIT,
    MEMORY_TYPE,
    MEMORY_USED_PERCENT,
)

T0_S = 1_700_000_000.0  # 2023-11-14 22:13:20 UTC
T0_US = int(T0_S * 1_000_000)

SampleFn = Callable[[int], Sequence[Sample]]


def machine(cpu: Sequence[float] = (20.0, 20.0), gpus: Sequence[tuple[float, float]] = (), *,
            iowait: Sequence[float] | None = None, memory: float = 30.0) -> list[Sample]:
    """One instant's samples: per-core CPU % (and I/O wait %), per-GPU (utilization %, memory %)."""
    out = [Sample(MEMORY_TYPE, MEMORY_USED_PERCENT, "", memory)]
    for i, value in enumerate(cpu):
        out.append(Sample(CPU_TYPE, f"cpu{i}", CPU_UTILIZATION, value))
        out.append(Sample(CPU_TYPE, f"cpu{i}", IO_WAIT, (iowait or [0.0] * len(cpu))[i]))
    for i, (util, mem) in enumerate(gpus):
        out.append(Sample(GPU_TYPE, f"gpu{i}", GPU_UTILIZATION, util))
        out.append(Sample(GPU_TYPE, f"gpu{i}", GPU_MEMORY_UTILIZATION, mem))
    return out


def noisy(rng: np.random.Generator, mean: float, spread: float = 3.0) -> float:
    return float(np.clip(rng.normal(mean, spread), 0.0, 100.0))


class JobWriter:
    """A job's profiler-output folder being written: the system sampler's files (one per
    `close_interval_s`) and one trace writer's, each on its own clock (seconds from T0_S)."""

    def __init__(self, root: Path, *, interval_s: float = 0.5, close_interval_s: int = 1,
                 node: str = "0-algo-1") -> None:
        self.root = root
        self.interval_s = interval_s
        self.system_writer = SystemMetricsWriter(root, close_interval_s=close_interval_s)
        self.trace_clock_us = T0_US
        self.trace_writer = TraceWriter(root, node, start_time_us=T0_US, clock_us=lambda: self.trace_clock_us,
                                        close_interval_s=3600)
        self.instant = 0  # system samples written
        self.trace_t_us = T0_US  # where the next event starts

    @property
    def system_t(self) -> float:
        return T0_S + self.instant * self.interval_s

    def system(self, n: int, fn: SampleFn) -> JobWriter:
        """n more sampling instants; closes every file whose period is over."""
        for _ in range(n):
            t = self.system_t
            self.system_writer.write(fn(self.instant), timestamp=t)
            self.instant += 1
        self.system_writer.close_if_due(self.system_t)
        return self

    def steps(self, durations_s: Sequence[float], *, mode: str = "TRAIN", first_step: int = 0,
              gap_s: float = 0.0, flush: bool = True) -> JobWriter:
        """Step events back to back (gap_s between them), from where the trace stands."""
        for i, d in enumerate(durations_s):
            start = self.trace_t_us
            end = start + int(d * 1e6)
            self.trace_writer.record_step(mode, first_step + i, start, end)
            self.trace_t_us = end + int(gap_s * 1e6)
        if flush:
            self.trace_writer.flush()
        return self

    def event(self, phase: str, name: str, duration_s: float, args: dict | None = None, *,
              advance: bool = True) -> JobWriter:
        start = self.trace_t_us
        end = start + int(duration_s * 1e6)
        self.trace_writer.record(phase, name, start, end, args)
        if advance:
            self.trace_t_us = end
        return self

    def skip(self, seconds: float) -> JobWriter:
        self.trace_t_us += int(seconds * 1e6)
        return self

    def flush(self) -> JobWriter:
        self.system_writer.close()
        self.trace_writer.flush()
        return self

    def end(self) -> JobWriter:
        self.system_writer.write_end_marker()
        self.trace_writer.write_end_marker()
        return self


def finished_trial(root: Path) -> ProfilerTrial:
    trial = ProfilerTrial.open(root)
    trial.assume_ended()
    trial.refresh()
    return trial


def judge_all(rule: object) -> object:
    """Evaluate a rule over a finished trial as the loop does: every window, then the end."""
    from sdlocal.evaluator.rule import Verdict

    verdict = rule.evaluate_windows()  # type: ignore[attr-defined]
    end = rule.finish()  # type: ignore[attr-defined]
    return Verdict.CONDITION_MET if verdict.fired or end.fired else verdict
