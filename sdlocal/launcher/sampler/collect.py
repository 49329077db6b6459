"""Collectors of system figures (each `sample() -> list[Sample]`, `close()`) and the helpers they
share: `HostCollector` (the whole machine, from /proc), `CompositeCollector`. The container
collector is in _cgroup.py, the GPU one in _nvml.py. Rates (CPU %, bytes/s) come from the
counters' change since the previous sample, so a collector's first sample has the gauges only.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from sdlocal.launcher.errors import LauncherError
from sdlocal.launcher.sampler.procfs import (
    CpuTimes,
    DiskCounters,
    parse_diskstats,
    parse_meminfo,
    parse_net_dev,
    parse_stat,
    read_text,
    whole_disks,
)
from sdlocal.trial.profiler import Sample
from sdlocal.trial.profiler.names import (
    CPU_TYPE,
    CPU_UTILIZATION,
    IO_TYPE,
    IO_WAIT,
    IOPS,
    MEMORY_TYPE,
    MEMORY_USED_PERCENT,
    NETWORK_DIMENSION,
    NETWORK_TYPE,
    READ_BPS,
    RECEIVE_BPS,
    TRANSMIT_BPS,
    WRITE_BPS,
)


class CollectorUnavailable(LauncherError):
    """This machine or container cannot be sampled (no /proc, cgroup files out of reach)."""


class Collector(Protocol):
    def sample(self) -> list[Sample]: ...

    def close(self) -> None: ...


def pct(part: float, whole: float) -> float:
    return min(100.0, max(0.0, 100.0 * part / whole)) if whole > 0 else 0.0


def cpu_samples(prev: dict[int, CpuTimes], cur: dict[int, CpuTimes], cores: Sequence[int]) -> list[Sample]:
    """CPUUtilization and I/OWaitPercentage of each core (named cpu0.. in the order given):
    busy = every state but idle and iowait, as psutil.cpu_percent counts it."""
    out = []
    for i, core in enumerate(cores):
        a, b = prev.get(core), cur.get(core)
        if a is None or b is None:
            continue
        total = b.total - a.total
        idle, iowait = b.idle - a.idle, b.iowait - a.iowait
        out.append(Sample(CPU_TYPE, f"cpu{i}", CPU_UTILIZATION, pct(total - idle - iowait, total)))
        out.append(Sample(CPU_TYPE, f"cpu{i}", IO_WAIT, pct(iowait, total)))
    return out


def rate_samples(prev: tuple[int, ...], cur: tuple[int, ...], dt: float,
                 names: Sequence[tuple[str, str, str]]) -> list[Sample]:
    """Per-second rates of counters (a counter that went back, e.g. a reset, counts as 0)."""
    if dt <= 0:
        return []
    return [Sample(t, n, d, max(0, c - p) / dt) for (t, n, d), p, c in zip(names, prev, cur, strict=True)]


NET_NAMES = ((NETWORK_TYPE, RECEIVE_BPS, NETWORK_DIMENSION), (NETWORK_TYPE, TRANSMIT_BPS, NETWORK_DIMENSION))
IO_NAMES = ((IO_TYPE, READ_BPS, ""), (IO_TYPE, WRITE_BPS, ""), (IO_TYPE, IOPS, ""))


MEMINFO_KEYS = ("MemTotal", "MemAvailable", "MemFree")


class HostCollector:
    """The whole machine: every core, memory, network (all interfaces but lo), whole disks."""

    def __init__(self, root: Path = Path("/"), monotonic: Callable[[], float] = time.monotonic) -> None:
        self.proc = root / "proc"
        self.monotonic = monotonic
        try:
            cpus = parse_stat(read_text(self.proc / "stat"))
            read_text(self.proc / "meminfo")
        except (OSError, ValueError) as e:
            raise CollectorUnavailable(f"cannot read the host's /proc ({e}): no system metrics") from e
        self.cores = sorted(cpus)
        self.disks = whole_disks(root / "sys" / "block")
        # Paths joined once: this runs every sample.
        self._files = (self.proc / "stat", self.proc / "meminfo", self.proc / "net" / "dev", self.proc / "diskstats")
        self._prev: tuple[float, dict[int, CpuTimes], tuple[int, int], DiskCounters] | None = None

    def sample(self) -> list[Sample]:
        now = self.monotonic()
        stat, meminfo, net_dev, diskstats = self._files
        cpus = parse_stat(read_text(stat))
        mem = parse_meminfo(read_text(meminfo), MEMINFO_KEYS)
        net = parse_net_dev(read_text(net_dev))
        disk = parse_diskstats(read_text(diskstats), self.disks) if self.disks else DiskCounters(0, 0, 0)
        total = mem.get("MemTotal", 0)
        available = mem.get("MemAvailable", mem.get("MemFree", 0))
        out = [Sample(MEMORY_TYPE, MEMORY_USED_PERCENT, "", pct(total - available, total))]
        if self._prev is not None:
            t0, cpus0, net0, disk0 = self._prev
            dt = now - t0
            out += cpu_samples(cpus0, cpus, self.cores)
            out += rate_samples(net0, net, dt, NET_NAMES)
            if self.disks:
                out += rate_samples(tuple(disk0), tuple(disk), dt, IO_NAMES)
        self._prev = (now, cpus, net, disk)
        return out

    def close(self) -> None:
        pass


class CompositeCollector:
    def __init__(self, collectors: Sequence[Collector]) -> None:
        self.collectors = list(collectors)

    def sample(self) -> list[Sample]:
        return [s for c in self.collectors for s in c.sample()]

    def close(self) -> None:
        for c in self.collectors:
            c.close()
