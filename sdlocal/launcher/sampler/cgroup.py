"""ContainerCollector: the figures of one Docker container, within its CPU and memory limits, read
from the host through the container's cgroup (v1 or v2) and its network namespace.

The container is found by the pid of its main process (`docker inspect` State.Pid): its
/proc/<pid>/cgroup names the cgroup, under /sys/fs/cgroup/<controller>/ (v1) or /sys/fs/cgroup/
(v2, when /sys/fs/cgroup/cgroup.controllers exists). A Linux Docker engine on this machine is
needed: with Docker Desktop the cgroups live in a VM and `CollectorUnavailable` says so.

- CPU: the container's cores are its cpuset. cgroup v1 accounts time per core
  (cpuacct.usage_percpu): each core's busy %. When a CPU quota (`--cpus`) is smaller than the
  cpuset, or on cgroup v2 (which has no per-core account), the figure is the container's usage
  as a share of what it may use (quota, else its cores), reported for ceil(quota) cores
  cpu0..: a container pinned at its `--cpus 1.5` reads 100 % on cpu0 and cpu1.
- I/OWaitPercentage: the kernel does not account I/O wait per cgroup; this is the host's I/O wait of
  the container's cores (their mean in the quota case).
- MemoryUsedPercent: usage less the inactive page cache (as `docker stats`) over the memory limit
  (the host's memory when there is none).
- Network: the container's interfaces (/proc/<pid>/net/dev, its own namespace).
- Disk: blkio.throttle.io_service_bytes / io_serviced (v1), io.stat (v2).
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path

from sdlocal.launcher.sampler.collect import (
    IO_NAMES,
    NET_NAMES,
    CollectorUnavailable,
    cpu_samples,
    pct,
    rate_samples,
)
from sdlocal.launcher.sampler.procfs import (
    CpuTimes,
    parse_cpu_list,
    parse_meminfo,
    parse_net_dev,
    parse_stat,
    read_text,
)
from sdlocal.trial.profiler import Sample
from sdlocal.trial.profiler.names import CPU_TYPE, CPU_UTILIZATION, IO_WAIT, MEMORY_TYPE, MEMORY_USED_PERCENT

_V1_CONTROLLERS = ("cpuacct", "cpu", "cpuset", "memory", "blkio")


def _int(path: Path) -> int:
    return int(read_text(path).strip())


def _stat_fields(path: Path) -> dict[str, int]:
    out = {}
    for line in read_text(path).splitlines():
        key, _, value = line.partition(" ")
        if value.strip().lstrip("-").isdigit():
            out[key] = int(value)
    return out


def _blkio(path: Path) -> tuple[int, int]:
    """(Read, Write) summed over devices of a v1 blkio file ("8:0 Read 4096")."""
    read = write = 0
    for line in read_text(path).splitlines():
        f = line.split()
        if len(f) == 3 and f[1] == "Read":
            read += int(f[2])
        elif len(f) == 3 and f[1] == "Write":
            write += int(f[2])
    return read, write


def _io_stat(path: Path) -> tuple[int, int, int]:
    """(rbytes, wbytes, rios + wios) summed over devices of a v2 io.stat."""
    totals = {"rbytes": 0, "wbytes": 0, "rios": 0, "wios": 0}
    for line in read_text(path).splitlines():
        for field in line.split()[1:]:
            key, _, value = field.partition("=")
            if key in totals:
                totals[key] += int(value)
    return totals["rbytes"], totals["wbytes"], totals["rios"] + totals["wios"]


class ContainerCollector:
    def __init__(self, pid: int, *, root: Path = Path("/"), monotonic: Callable[[], float] = time.monotonic) -> None:
        self.pid = pid
        self.root = root
        self.monotonic = monotonic
        self.proc = root / "proc"
        cgroup_fs = root / "sys" / "fs" / "cgroup"
        try:
            lines = read_text(self.proc / str(pid) / "cgroup").splitlines()
        except OSError as e:
            raise CollectorUnavailable(f"container process {pid}: cannot read its cgroup ({e})") from e
        paths = {}
        for line in lines:
            _, controllers, path = line.split(":", 2)
            for c in controllers.split(","):
                paths[c] = path.lstrip("/")
        self.v2 = (cgroup_fs / "cgroup.controllers").exists()
        if self.v2:
            self.dirs = {c: cgroup_fs / paths.get("", "") for c in _V1_CONTROLLERS}
        else:
            self.dirs = {c: cgroup_fs / c / paths.get(c, "") for c in _V1_CONTROLLERS}
        probe = self.dirs["cpu"] / "cpu.stat" if self.v2 else self.dirs["cpuacct"] / "cpuacct.usage_percpu"
        if not probe.is_file():
            raise CollectorUnavailable(
                f"container process {pid}: its cgroup files are not readable here ({probe}); "
                "the container collector needs a Linux Docker engine on this machine")
        self.cores, self.quota = self._limits()
        self._prev: tuple[float, list[int], int, dict[int, CpuTimes], tuple[int, int], tuple[int, ...]] | None = None

    # ---- limits ------------------------------------------------------------------------------------
    def _limits(self) -> tuple[list[int], float | None]:
        """(cores of the cpuset, CPU quota in cores or None)."""
        host_cores = sorted(parse_stat(read_text(self.proc / "stat")))
        if self.v2:
            cpus_file = self.dirs["cpuset"] / "cpuset.cpus.effective"
            max_file = self.dirs["cpu"] / "cpu.max"
            parts = read_text(max_file).split() if max_file.is_file() else []
            quota = int(parts[0]) / int(parts[1]) if len(parts) == 2 and parts[0] != "max" else None
        else:
            cpus_file = self.dirs["cpuset"] / "cpuset.cpus"
            q_us = _int(self.dirs["cpu"] / "cpu.cfs_quota_us")
            period = _int(self.dirs["cpu"] / "cpu.cfs_period_us")
            quota = q_us / period if q_us > 0 and period > 0 else None
        cores = parse_cpu_list(read_text(cpus_file)) if cpus_file.is_file() else []
        return [c for c in cores if c in host_cores] or host_cores, quota

    @property
    def per_core(self) -> bool:
        """Per-core figures (v1 without a quota below the cpuset), else one share for ceil(quota) cores."""
        return not self.v2 and (self.quota is None or self.quota >= len(self.cores))

    # ---- counters ----------------------------------------------------------------------------------
    def _cpu_usage(self) -> tuple[list[int], int]:
        """(ns per host core (v1; empty on v2), total ns)."""
        if self.v2:
            return [], _stat_fields(self.dirs["cpu"] / "cpu.stat")["usage_usec"] * 1000
        per_cpu = [int(v) for v in read_text(self.dirs["cpuacct"] / "cpuacct.usage_percpu").split()]
        return per_cpu, sum(per_cpu)

    def _memory_pct(self) -> float:
        host_total = parse_meminfo(read_text(self.proc / "meminfo"), ("MemTotal",)).get("MemTotal", 0)
        d = self.dirs["memory"]
        if self.v2:
            usage = _int(d / "memory.current")
            raw = read_text(d / "memory.max").strip()
            limit = host_total if raw == "max" else int(raw)
            inactive = _stat_fields(d / "memory.stat").get("inactive_file", 0)
        else:
            usage = _int(d / "memory.usage_in_bytes")
            limit = _int(d / "memory.limit_in_bytes")
            inactive = _stat_fields(d / "memory.stat").get("total_inactive_file", 0)
        limit = min(limit, host_total) if host_total else limit
        return pct(usage - inactive, limit)

    def _disk(self) -> tuple[int, ...]:
        try:
            if self.v2:
                return _io_stat(self.dirs["blkio"] / "io.stat")
            rb, wb = _blkio(self.dirs["blkio"] / "blkio.throttle.io_service_bytes")
            r_ops, w_ops = _blkio(self.dirs["blkio"] / "blkio.throttle.io_serviced")
            return rb, wb, r_ops + w_ops
        except FileNotFoundError:
            return (0, 0, 0)

    def sample(self) -> list[Sample]:
        now = self.monotonic()
        per_cpu, total_ns = self._cpu_usage()
        host = parse_stat(read_text(self.proc / "stat"))
        net = parse_net_dev(read_text(self.proc / str(self.pid) / "net" / "dev"))
        disk = self._disk()
        out = [Sample(MEMORY_TYPE, MEMORY_USED_PERCENT, "", self._memory_pct())]
        if self._prev is not None:
            t0, per_cpu0, total0, host0, net0, disk0 = self._prev
            dt = now - t0
            out += self._cpu(dt, per_cpu0, per_cpu, total0, total_ns, host0, host)
            out += rate_samples(net0, net, dt, NET_NAMES)
            out += rate_samples(disk0, disk, dt, IO_NAMES)
        self._prev = (now, per_cpu, total_ns, host, net, disk)
        return out

    def _cpu(self, dt: float, per0: list[int], per1: list[int], total0: int, total1: int,
             host0: dict[int, CpuTimes], host1: dict[int, CpuTimes]) -> list[Sample]:
        if dt <= 0:
            return []
        host_figures = cpu_samples(host0, host1, self.cores)
        iowait = [s.value for s in host_figures if s.dimension == IO_WAIT]
        out = []
        if self.per_core:
            for i, core in enumerate(self.cores):
                busy = per1[core] - per0[core] if core < min(len(per0), len(per1)) else 0
                out.append(Sample(CPU_TYPE, f"cpu{i}", CPU_UTILIZATION, pct(busy, dt * 1e9)))
                if i < len(iowait):
                    out.append(Sample(CPU_TYPE, f"cpu{i}", IO_WAIT, iowait[i]))
            return out
        capacity = min(float(len(self.cores)), self.quota or float(len(self.cores)))
        share = pct(total1 - total0, dt * 1e9 * capacity)
        mean_iowait = sum(iowait) / len(iowait) if iowait else 0.0
        for i in range(max(1, math.ceil(capacity))):
            out.append(Sample(CPU_TYPE, f"cpu{i}", CPU_UTILIZATION, share))
            out.append(Sample(CPU_TYPE, f"cpu{i}", IO_WAIT, mean_iowait))
        return out

    def close(self) -> None:
        pass
