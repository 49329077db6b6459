"""Counters of Linux's /proc, parsed from text (the figures are computed by the collectors).

Why /proc and not psutil: the counters the sampler needs are four small text files the kernel
formats on read (/proc/stat, /proc/meminfo, /proc/net/dev, /proc/diskstats); parsing them is a few
tens of microseconds, psutil would read the same files through an extra compiled dependency, and
the container collector reads /proc/<pid>/net/dev and cgroup files that psutil does not know.
The price: Linux only (elsewhere the host collector is unavailable and the platform says so).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple


class CpuTimes(NamedTuple):
    """Jiffies of one CPU since boot: `total` of every state, `idle` and `iowait` among them."""

    total: int
    idle: int
    iowait: int


def parse_stat(text: str) -> dict[int, CpuTimes]:
    """Per-CPU times of /proc/stat ("cpuN user nice system idle iowait irq softirq steal ...").
    guest and guest_nice are already counted in user and nice, so they are left out of the total."""
    cpus: dict[int, CpuTimes] = {}
    for line in text.splitlines():
        if not line.startswith("cpu") or line.startswith("cpu "):
            continue
        name, *fields = line.split()
        values = [int(v) for v in fields[:8]]
        values += [0] * (8 - len(values))
        cpus[int(name[3:])] = CpuTimes(sum(values), values[3], values[4])
    return cpus


def parse_meminfo(text: str, keys: tuple[str, ...] | None = None) -> dict[str, int]:
    """/proc/meminfo in bytes ("MemTotal:  16318412 kB"); with `keys`, stops once it has them
    (MemTotal and MemAvailable are its first lines: no need to split the other fifty)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if keys is not None and key not in keys:
            continue
        parts = rest.split()
        if parts:
            out[key] = int(parts[0]) * (1024 if len(parts) > 1 and parts[1] == "kB" else 1)
        if keys is not None and len(out) == len(keys):
            break
    return out


def parse_net_dev(text: str) -> tuple[int, int]:
    """(received, transmitted) bytes of every interface but loopback (/proc/net/dev)."""
    rx = tx = 0
    for line in text.splitlines()[2:]:
        iface, _, rest = line.partition(":")
        fields = rest.split()
        if iface.strip() == "lo" or len(fields) < 9:
            continue
        rx += int(fields[0])
        tx += int(fields[8])
    return rx, tx


class DiskCounters(NamedTuple):
    read_bytes: int
    write_bytes: int
    ops: int


def parse_diskstats(text: str, disks: set[str]) -> DiskCounters:
    """Totals of the whole disks named in `disks` (/proc/diskstats: sectors are 512 bytes)."""
    rb = wb = ops = 0
    for line in text.splitlines():
        f = line.split()
        if len(f) < 10 or f[2] not in disks:
            continue
        ops += int(f[3]) + int(f[7])
        rb += int(f[5]) * 512
        wb += int(f[9]) * 512
    return DiskCounters(rb, wb, ops)


def whole_disks(sys_block: Path) -> set[str]:
    """Block devices that are whole disks (not partitions), without loop and RAM devices."""
    try:
        names = {p.name for p in sys_block.iterdir()}
    except OSError:
        return set()
    return {n for n in names if not n.startswith(("loop", "ram", "zram"))}


def parse_cpu_list(text: str) -> list[int]:
    """ "0-3,8,10-11" -> [0, 1, 2, 3, 8, 10, 11] (cpuset.cpus, /sys/.../online)."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return sorted(set(cpus))


def read_text(path: Path) -> str:
    """One read(2) of a small kernel file (no text-layer buffering: this runs every sample)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("ascii", errors="replace")
