"""Real profiled CPU trainings: what a job with a ProfilerConfig leaves in its profiler-output.

A run is laid out as a job's S3 prefix: `<run>/debug-output/` (the hook's tensors) and
`<run>/profiler-output/` (`system/` from the platform's sampler, `framework/` from the hook's
timeline), and produced as `sdlocal run`'s process runtime produces them (launcher/job/lifecycle.py):

- the hook reads a profilerconfig.json (`PROFILER_CONFIG` + LocalPath = the profiler-output
  folder) and records the framework timeline (steps, forward, backward) at every step, and the
  data loader's events (DataloaderProfilingConfig over the whole run);
- the system sampler of launcher/sampler/sampler.py (`make_sampler`, the host's /proc, NVML when
  there is a GPU) samples every ProfilingIntervalInMilliseconds into 1-second files
  (LIVE_CLOSE_INTERVAL_S), started before the training loop, stopped (last file closed) after it;
- then the end markers `system/training_job_end.ts` and `framework/training_job_end.ts`.
The training runs in this process (the hook's explicit API, as detection.training) so that a run
costs seconds; `sdlocal run` starts the same hook in a child process.

Faults, each one change to the healthy run: slow steps (every `slow_every`-th step sleeps
`slow_factor` x the median of the first 20 steps, measured in the run: 10 x, well above
StepOutlier's mean + 3 std whatever this machine's speed), a slow start (`start_delay_s` before the first step),
and a bad data-loader worker count (`num_workers=0`: the training process loads its own batches).
"""
from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, Sampler, TensorDataset

from detection import models
from detection.errors import DetectionError
from detection.hookconfig import hook_config
from sdlocal.hook import _timeline
from sdlocal.hook.profiler_config import ProfilerConfig
from sdlocal.hook.pytorch import Hook
from sdlocal.launcher.sampler.procfs import parse_stat
from sdlocal.launcher.sampler.sampler import LIVE_CLOSE_INTERVAL_S, CollectorUnavailable, make_sampler
from sdlocal.trial.modes import ModeKeys
from sdlocal.trial.profiler.names import FRAMEWORK_END_MARKER, SYSTEM_END_MARKER

INTERVAL_MS = 500  # SageMaker's default ProfilingIntervalInMilliseconds
# profilerconfig.json's ProfilingParameters (LocalPath added per run): the framework timeline
# at every step (our hook: any enabled config) and the data loader's events for the whole run.
PROFILER_CONFIG: Mapping[str, str] = {
    "ProfilingIntervalInMilliseconds": str(INTERVAL_MS),
    "DataloaderProfilingConfig": json.dumps({"StartStep": 0, "NumSteps": 100000}),
}
# The hook's tensor config of a profiled job: the default schedule (losses every 500 steps).
HOOK_REQUEST: Mapping[str, Any] = {"HookParameters": {}, "CollectionConfigurations": [{"CollectionName": "losses"}]}
WARMUP_STEPS = 20  # steps timed to scale the slow steps
# A step is starved when the training thread waited for a core (Linux's run-queue delay,
# /proc/thread-self/schedstat) for more than half of its time: other processes on this shared
# machine had the cores (the matrix reports how many steps were starved: under load, StepOutlier
# rightly sees a burst of them as slow steps).
SCHEDSTAT = Path("/proc/thread-self/schedstat")


def cores() -> int:
    """The healthy worker count: one per core the sampler reports (Dataloader wants 70-200 % of
    them): the host sampler writes a series per core of /proc/stat, not per core of this process's
    affinity."""
    try:
        return len(parse_stat(Path("/proc/stat").read_text())) or 1
    except OSError:
        return os.cpu_count() or 1


@dataclass(frozen=True)
class ProfiledSetup:
    seed: int = 0
    steps: int = 300
    batch_size: int = 192  # the mean: batches of 12-372 samples (see VariableBatches)
    num_workers: int | None = None  # None: one per core
    start_delay_s: float = 0.0
    slow_every: int = 0  # 0: no slow steps
    slow_factor: float = 10.0
    min_seconds: float = 2.5  # at least this long (5 samples at 500 ms): the sampler needs 2 for CPU figures


def healthy(seed: int = 30) -> ProfiledSetup:
    return ProfiledSetup(seed=seed)


def slow_steps(seed: int = 31) -> ProfiledSetup:
    # 300 steps, every 21st slow from step 21: 14 outliers (StepOutlier: more than 10) and 4.7 %
    # of the steps, so that they stay above mean + 3 std: with the batches' spread, about 8 x the
    # mean step against 11 x for a slow one (a 1.4 x margin; the sleep is a floor, never shorter).
    return ProfiledSetup(seed=seed, slow_every=21)


def slow_start(seed: int = 32) -> ProfiledSetup:
    # 15 s before the first step against a threshold of 6 s (0.1 min; the healthy run's first step
    # comes 0.06 s after the first sample, up to 2.8 s as the first run of a loaded process)
    return ProfiledSetup(seed=seed, start_delay_s=15.0)


def no_workers(seed: int = 33) -> ProfiledSetup:
    return ProfiledSetup(seed=seed, num_workers=0)


class VariableBatches(Sampler[list[int]]):
    """Random batches of `mean // 16` to `2 * mean - mean // 16` samples (bucketed or packed batches
    vary so): steps of varying work, whose spread (std about 54 % of the mean) keeps the scheduler's
    millisecond hiccups on this shared machine within StepOutlier's mean + 3 std."""

    def __init__(self, n: int, mean: int, batches: int, gen: torch.Generator) -> None:
        sizes = torch.randint(mean // 16, 2 * mean - mean // 16 + 1, (batches,), generator=gen).tolist()
        order = torch.randint(0, n, (sum(sizes),), generator=gen).tolist()
        self.batches: list[list[int]] = []
        at = 0
        for size in sizes:
            self.batches.append(order[at:at + size])
            at += size

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)


def _run_queue_s() -> float:
    """Seconds this thread has waited on a run queue so far (0 where the kernel does not say)."""
    try:
        return int(SCHEDSTAT.read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def _write_profiler_config(run: Path, profiler_dir: Path) -> ProfilerConfig:
    body = {"ProfilingParameters": {**PROFILER_CONFIG, "LocalPath": str(profiler_dir)}, "DisableProfiler": False}
    path = run / "profilerconfig.json"
    path.write_text(json.dumps(body, indent=1))
    return ProfilerConfig.from_json_file(path)


def train_profiled(setup: ProfiledSetup, run: Path) -> dict[str, float]:
    """Train `setup` into `run/` (debug-output and profiler-output, end markers written);
    returns the first/last train loss, the median step time and the run's number of loaders."""
    run.mkdir(parents=True, exist_ok=True)
    profiler_dir, debug_dir = run / "profiler-output", run / "debug-output"
    torch.set_num_threads(1)
    config = _write_profiler_config(run, profiler_dir)
    try:
        sampler = make_sampler(profiler_dir, INTERVAL_MS, close_interval_s=LIVE_CLOSE_INTERVAL_S)
    except CollectorUnavailable as e:
        raise DetectionError(f"system metrics cannot be sampled here: {e}") from e
    sampler.start()  # lifecycle.py starts it with the training: the job's first datapoint
    started = time.monotonic()
    timeline = _timeline.configure(config)
    try:
        assert timeline is not None
        out = _loop(setup, debug_dir, started)
    finally:
        _timeline.shutdown()  # the last trace file gets its final name
        sampler.stop()
    (profiler_dir / SYSTEM_END_MARKER).parent.mkdir(parents=True, exist_ok=True)
    (profiler_dir / SYSTEM_END_MARKER).write_bytes(b"")
    (profiler_dir / FRAMEWORK_END_MARKER).parent.mkdir(parents=True, exist_ok=True)
    (profiler_dir / FRAMEWORK_END_MARKER).write_bytes(b"")
    return out


def _loop(setup: ProfiledSetup, debug_dir: Path, started: float) -> dict[str, float]:
    gen = torch.Generator().manual_seed(setup.seed)
    torch.manual_seed(setup.seed)
    n = 4096
    x, y = models.blobs(n, 16, 3, gen)
    workers = cores() if setup.num_workers is None else setup.num_workers
    # batch_size=None: the sampler's index lists index the tensors at once (one fetch per batch)
    loader = DataLoader(TensorDataset(x, y), sampler=VariableBatches(n, setup.batch_size, setup.steps, gen),
                        batch_size=None, num_workers=workers)
    model = models.MLP(16, 512, 2, 3)
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    hook = Hook(hook_config(debug_dir, HOOK_REQUEST), out_dir=debug_dir)
    hook.register_module(model)
    hook.register_loss(criterion)
    if setup.start_delay_s:
        time.sleep(setup.start_delay_s)  # the slow start: e.g. copying a data set before the loop
    losses: list[float] = []
    times: list[float] = []
    starved = 0
    slow_s = 0.0
    try:
        hook.set_mode(ModeKeys.TRAIN)
        for step, (xb, yb) in enumerate(loader):
            t0, q0 = time.perf_counter(), _run_queue_s()
            loss = criterion(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            if setup.slow_every and step == WARMUP_STEPS:
                slow_s = setup.slow_factor * statistics.median(times)
            slept = 0.0
            if setup.slow_every and step >= WARMUP_STEPS and step % setup.slow_every == 0:
                s0 = time.perf_counter()
                time.sleep(slow_s)  # inside the step: between the backward pass and the optimizer step
                slept = time.perf_counter() - s0
            opt.step()
            wall = time.perf_counter() - t0 - slept
            times.append(wall)
            starved += _run_queue_s() - q0 > wall / 2
            losses.append(float(loss.item()))
        left = setup.min_seconds - (time.monotonic() - started)
        if left > 0:
            time.sleep(left)  # after the loop, so the sampler has CPU figures of the run
    finally:
        hook.close()
    return {"first_loss": losses[0], "last_loss": losses[-1], "median_step_ms": 1e3 * statistics.median(times),
            "loaders": float(workers), "starved_steps": float(starved)}
