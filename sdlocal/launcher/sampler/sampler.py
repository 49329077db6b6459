"""The system monitor: samples the training every ProfilingIntervalInMilliseconds and writes
SageMaker's system-metric files (trial.profiler.SystemMetricsWriter) into the job's local
`profiler-output/`, which the platform's uploader copies to S3 like the tensors.

    sampler = make_sampler(job_dir / "profiler", interval_ms=500)              # process runtime
    sampler = make_sampler(job_dir / "profiler", 500, container_pid=pid)       # docker runtime
    sampler.start(); ...; sampler.stop()        # stop closes the open file (a closed file is uploaded)

Collectors: `HostCollector` (the machine, from /proc; _collect.py), `ContainerCollector` (one
container within its CPU/memory limits, from its cgroup; _cgroup.py), `GpuCollector` (NVML;
_nvml.py), combined by `CompositeCollector`.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from sdlocal.launcher.sampler.cgroup import ContainerCollector
from sdlocal.launcher.sampler.collect import (
    Collector,
    CollectorUnavailable,
    CompositeCollector,
    HostCollector,
)
from sdlocal.launcher.sampler.nvml import GpuCollector, open_gpu_collector
from sdlocal.trial.errors import one_line
from sdlocal.trial.profiler import SystemMetricsWriter
from sdlocal.trial.profiler.names import DEFAULT_NODE

if TYPE_CHECKING:
    from sdlocal.launcher.runtime import Handle

__all__ = [
    "Collector",
    "CollectorUnavailable",
    "CompositeCollector",
    "ContainerCollector",
    "GpuCollector",
    "HostCollector",
    "SystemSampler",
    "make_sampler",
    "open_gpu_collector",
]

log = logging.getLogger(__name__)

# How long a system-metrics file stays open during a job (`make_sampler(close_interval_s=...)`).
# SageMaker closes one file per minute: a profiler rule would then see a sample up to a minute
# late. Rules must follow the data within about 2 s (issue 10): a sample waits at most this long
# for its file to close, then at most one upload interval (1 s) for the uploader. 1 s costs 60
# files a minute (at any sampling interval up to 1 s; one per sample beyond), which the profiler
# reader lists incrementally (docs/profiler-data.md: 20-80 ms an idle poll on moto).
LIVE_CLOSE_INTERVAL_S = 1


class SystemSampler:
    """Samples `collector` every `interval_s` on a thread and writes through `writer`.

    `clock` gives the epoch seconds written as Timestamp; the schedule runs on `monotonic` (a
    fixed rate: a late sample does not shift the next ones; missed ticks are skipped). A failing
    collector is logged once per kind of error and sampling goes on: the monitor never stops a job."""

    def __init__(
        self,
        collector: Collector,
        writer: SystemMetricsWriter,
        interval_s: float,
        clock: Callable[[], float] = time.time,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be positive, not {interval_s!r}")
        self.collector = collector
        self.writer = writer
        self.interval_s = float(interval_s)
        self.clock = clock
        self.monotonic = monotonic
        self.samples = 0  # sampling instants written
        self.lines = 0
        self.cpu_seconds = 0.0  # CPU time of the sampling thread spent sampling and writing
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False

    def sample_once(self) -> int:
        """Take and write one sample now; returns the lines written."""
        if self._closed:
            return 0
        cpu0 = time.thread_time()
        try:
            # The collector runs outside the lock: a collector stuck in a read cannot block stop().
            samples = self.collector.sample()
            now = self.clock()
            with self._lock:
                if self._closed:
                    return 0
                n = self.writer.write(samples, now)
                self.writer.close_if_due(now)
        except Exception as e:  # noqa: BLE001 - keep sampling; say it once
            kind = f"{type(e).__name__}: {e}"
            if kind not in self.errors:
                self.errors.append(kind)
                log.warning("system metrics: a sample failed (%s); sampling goes on", kind)
            return 0
        self.samples += 1 if n else 0
        self.lines += n
        self.cpu_seconds += time.thread_time() - cpu0
        return n

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("the sampler is already started")
        self._thread = threading.Thread(target=self._run, name="sdlocal-system-monitor", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        next_at = self.monotonic()
        while True:
            now = self.monotonic()
            if now >= next_at:
                self.sample_once()
                next_at += self.interval_s
                now = self.monotonic()
                if next_at <= now:  # fell behind (a suspended machine, a slow disk): skip the missed ticks
                    next_at = now + self.interval_s
            else:  # woken for the open file's period end: close it now, not at the next sample
                self._close_if_due()
            wait = next_at - now
            closes_in = self._closes_in()
            if closes_in is not None:
                wait = min(wait, max(closes_in, 0.0) + 0.001)
            if self._stop.wait(wait):
                return

    def _closes_in(self) -> float | None:
        """Seconds until the open file's period ends (a sampling interval longer than the file's
        period would otherwise keep it open, out of the uploader's sight, until the next sample)."""
        until = self.writer.open_until
        return None if until is None else until - self.clock()

    def _close_if_due(self) -> None:
        try:
            with self._lock:
                if not self._closed:
                    self.writer.close_if_due(self.clock())
        except OSError as e:  # a full disk: say it once, sampling goes on
            kind = f"{type(e).__name__}: {e}"
            if kind not in self.errors:
                self.errors.append(kind)
                log.warning("system metrics: closing a file failed (%s); sampling goes on", kind)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread and close the open file, waiting at most about `timeout` s; idempotent."""
        self._stop.set()
        stuck = False
        if self._thread is not None:
            self._thread.join(timeout)
            stuck = self._thread.is_alive()
            if stuck:
                log.warning("system metrics: the sampler did not stop within %g s", timeout)
        if not self._lock.acquire(timeout=timeout):
            log.warning("system metrics: the last file could not be closed within %g s", timeout)
            return
        try:
            if self._closed:
                return
            self._closed = True
            self.writer.close()
        finally:
            self._lock.release()
        if not stuck:  # a collector still inside sample() on the stuck thread is left alone
            self.collector.close()


def make_sampler(
    profiler_dir: str | Path,
    interval_ms: int,
    *,
    container_pid: int | None = None,
    gpu_indices: Sequence[int] | None = None,
    node_id: str = DEFAULT_NODE,
    close_interval_s: int = 60,
    root: Path = Path("/"),
) -> SystemSampler:
    """The platform's sampler: the host (or the container whose main process is `container_pid`),
    plus every GPU NVML sees (or those of `gpu_indices`). Without NVML or GPU: one info line, no gpu
    lines. Raises CollectorUnavailable when the host or the container cannot be read."""
    base: Collector = HostCollector(root) if container_pid is None else ContainerCollector(container_pid, root=root)
    gpu, why = open_gpu_collector(gpu_indices)
    if gpu is None:
        log.info("system metrics: no GPU metrics: %s", why)
    collector = base if gpu is None else CompositeCollector([base, gpu])
    writer = SystemMetricsWriter(profiler_dir, node_id, close_interval_s=close_interval_s)
    return SystemSampler(collector, writer, interval_ms / 1000.0)


def start_sampler(factory: Callable[..., SystemSampler], training: Handle, folder: Path, interval_ms: int,
                  profiler_output: str, echo: Callable[[str], None], node_id: str | None = None) -> SystemSampler | None:
    """The system sampler of a started training (the host's figures under the process runtime, its
    container's under docker), started; None (said) where it cannot sample. `node_id`: the
    NodeId its files carry (default algo-1)."""
    pid = training.container_pid()
    node = f" ({node_id})" if node_id else ""
    if training.in_container and pid is None:
        echo(f"System metrics{node}: not sampled (the training container is not running)")
        return None
    try:
        # a container gets no GPU from the docker runtime: none of the host's GPUs is its own
        sampler = factory(folder, interval_ms, container_pid=pid, gpu_indices=() if training.in_container else None,
                          close_interval_s=LIVE_CLOSE_INTERVAL_S, **({"node_id": node_id} if node_id else {}))
    except CollectorUnavailable as e:
        echo(f"System metrics{node}: not sampled ({one_line(e)})")
        return None
    sampler.start()
    what = "the training container" if training.in_container else "this host"
    echo(f"System metrics of {what}{node} every {interval_ms} ms: {profiler_output}/system/")
    return sampler
