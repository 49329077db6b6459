"""The container collector: cgroup v1 and v2 trees laid out as the kernel does (this host runs v1;
v2 is exercised on a tree of files), and a real container of a local image (marker docker)."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from sdlocal.launcher.sampler.cgroup import ContainerCollector
from sdlocal.launcher.sampler.sampler import CollectorUnavailable

from .test_sampler import NET, Clock, write_proc

PID = 4242
CID = "docker/abc123"
GIB = 1024**3


def figures(samples: list[Any]) -> dict[tuple[str, str, str], float]:
    return {(s.type, s.name, s.dimension): s.value for s in samples}


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def v1_tree(root: Path, *, percpu: str, quota: int = -1, cpus: str = "0-1", usage: int = GIB // 2,
            limit: int = 2 * GIB, inactive: int = GIB // 4, io_bytes: tuple[int, int] = (0, 0)) -> None:
    write_proc(root, meminfo="MemTotal:  4194304 kB\nMemAvailable: 1048576 kB\n")
    _write(root / f"proc/{PID}/cgroup", "".join(
        f"{i}:{c}:/{CID}\n" for i, c in enumerate(["cpu", "cpuacct", "cpuset", "memory", "blkio"], 1)) + f"0::/{CID}\n")
    _write(root / f"proc/{PID}/net/dev", NET)
    fs = root / "sys/fs/cgroup"
    _write(fs / f"cpuacct/{CID}/cpuacct.usage_percpu", percpu + " \n")
    _write(fs / f"cpu/{CID}/cpu.cfs_quota_us", f"{quota}\n")
    _write(fs / f"cpu/{CID}/cpu.cfs_period_us", "100000\n")
    _write(fs / f"cpuset/{CID}/cpuset.cpus", cpus + "\n")
    _write(fs / f"memory/{CID}/memory.usage_in_bytes", f"{usage}\n")
    _write(fs / f"memory/{CID}/memory.limit_in_bytes", f"{limit}\n")
    _write(fs / f"memory/{CID}/memory.stat", f"cache 0\ninactive_file 1\ntotal_inactive_file {inactive}\n")
    _write(fs / f"blkio/{CID}/blkio.throttle.io_service_bytes",
           f"8:0 Read {io_bytes[0]}\n8:0 Write {io_bytes[1]}\n8:0 Total {sum(io_bytes)}\nTotal {sum(io_bytes)}\n")
    _write(fs / f"blkio/{CID}/blkio.throttle.io_serviced", "8:0 Read 0\n8:0 Write 0\nTotal 0\n")


def test_cgroup_v1_per_core(tmp_path: Path) -> None:
    v1_tree(tmp_path, percpu="1000000000 2000000000")
    clock = Clock()
    c = ContainerCollector(PID, root=tmp_path, monotonic=clock)
    assert (c.v2, c.cores, c.quota, c.per_core) == (False, [0, 1], None, True)
    # Memory: (usage - inactive file cache) over the limit (2 GiB, below the host's 4 GiB).
    assert figures(c.sample()) == {("memory", "MemoryUsedPercent", ""): 12.5}
    # 2 s later core 0 ran 1.5 s for the container, core 1 0.2 s; 1 MiB read.
    v1_tree(tmp_path, percpu="2500000000 2200000000", io_bytes=(2**20, 0))
    clock.t += 2
    got = figures(c.sample())
    assert got[("cpu", "cpu0", "CPUUtilization")] == 75.0
    assert got[("cpu", "cpu1", "CPUUtilization")] == pytest.approx(10.0)
    assert got[("cpu", "cpu0", "I/OWaitPercentage")] == 0.0  # the host's, of this core
    assert got[("i/o", "ReadThroughputInBytesPerSecond", "")] == 2**19
    assert ("network", "ReceiveBytesPerSecond", "Algorithm") in got


def test_cgroup_v1_quota_and_cpuset(tmp_path: Path) -> None:
    # --cpus 1.5 on cores 0-1: the container's share of 1.5 cores, for cpu0 and cpu1.
    v1_tree(tmp_path, percpu="0 0", quota=150000, limit=2**63 - 4096)
    clock = Clock()
    c = ContainerCollector(PID, root=tmp_path, monotonic=clock)
    assert (c.quota, c.per_core) == (1.5, False)
    # No memory limit: the host's memory (4 GiB) is the whole.
    assert figures(c.sample()) == {("memory", "MemoryUsedPercent", ""): 6.25}
    v1_tree(tmp_path, percpu="750000000 750000000", quota=150000)
    clock.t += 1
    got = figures(c.sample())
    assert got[("cpu", "cpu0", "CPUUtilization")] == got[("cpu", "cpu1", "CPUUtilization")] == 100.0
    # --cpuset-cpus 1: one core, named cpu0.
    v1_tree(tmp_path, percpu="0 0", cpus="1")
    c = ContainerCollector(PID, root=tmp_path, monotonic=clock)
    c.sample()
    v1_tree(tmp_path, percpu="900000000 300000000", cpus="1")
    clock.t += 1
    got = figures(c.sample())
    assert [k[1] for k in got if k[2] == "CPUUtilization"] == ["cpu0"]
    assert got[("cpu", "cpu0", "CPUUtilization")] == pytest.approx(30.0)


def v2_tree(root: Path, *, usage_usec: int, cpu_max: str = "max 100000", memory_max: str = "max") -> None:
    write_proc(root, meminfo="MemTotal:  4194304 kB\n")
    _write(root / f"proc/{PID}/cgroup", "0::/system.slice/docker-abc.scope\n")
    _write(root / f"proc/{PID}/net/dev", NET)
    fs = root / "sys/fs/cgroup"
    _write(fs / "cgroup.controllers", "cpuset cpu io memory pids\n")
    d = fs / "system.slice/docker-abc.scope"
    _write(d / "cpu.stat", f"usage_usec {usage_usec}\nuser_usec 1\nsystem_usec 1\n")
    _write(d / "cpu.max", cpu_max + "\n")
    _write(d / "cpuset.cpus.effective", "0-1\n")
    _write(d / "memory.current", f"{GIB}\n")
    _write(d / "memory.max", memory_max + "\n")
    _write(d / "memory.stat", "anon 1\ninactive_file 536870912\n")
    _write(d / "io.stat", f"8:0 rbytes={usage_usec} wbytes=0 rios=3 wios=1 dbytes=0 dios=0\n")


def test_cgroup_v2(tmp_path: Path) -> None:
    v2_tree(tmp_path, usage_usec=0)
    clock = Clock()
    c = ContainerCollector(PID, root=tmp_path, monotonic=clock)
    assert (c.v2, c.cores, c.quota, c.per_core) == (True, [0, 1], None, False)
    assert figures(c.sample()) == {("memory", "MemoryUsedPercent", ""): 12.5}
    v2_tree(tmp_path, usage_usec=1_000_000)  # 1 s of CPU in 1 s, on 2 cores: 50 % of the container's
    clock.t += 1
    got = figures(c.sample())
    assert got[("cpu", "cpu0", "CPUUtilization")] == got[("cpu", "cpu1", "CPUUtilization")] == 50.0
    assert got[("i/o", "ReadThroughputInBytesPerSecond", "")] == 1_000_000
    # --cpus 0.5 and --memory 2g
    v2_tree(tmp_path, usage_usec=0, cpu_max="50000 100000", memory_max=str(2 * GIB))
    c = ContainerCollector(PID, root=tmp_path, monotonic=clock)
    assert figures(c.sample()) == {("memory", "MemoryUsedPercent", ""): 25.0}
    v2_tree(tmp_path, usage_usec=250_000, cpu_max="50000 100000", memory_max=str(2 * GIB))
    clock.t += 1
    got = figures(c.sample())
    assert [k[1] for k in got if k[2] == "CPUUtilization"] == ["cpu0"] and got[("cpu", "cpu0", "CPUUtilization")] == 50.0


def test_unreachable_cgroup_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CollectorUnavailable, match="container process 4242: cannot read its cgroup"):
        ContainerCollector(PID, root=tmp_path)
    v1_tree(tmp_path, percpu="0 0")
    (tmp_path / f"sys/fs/cgroup/cpuacct/{CID}/cpuacct.usage_percpu").unlink()
    with pytest.raises(CollectorUnavailable, match="needs a Linux Docker engine on this machine"):
        ContainerCollector(PID, root=tmp_path)


@pytest.mark.docker
def test_a_real_container(docker_client: Any) -> None:
    """A busy container held to --cpus 0.5 on one core and --memory 64m, as Docker sees it."""
    from sdlocal.launcher.images.build import evaluator_image

    image = evaluator_image()
    try:
        docker_client.images.get(image)
    except Exception:  # noqa: BLE001
        pytest.skip(f"image {image} is not built here")
    container = docker_client.containers.run(
        image, entrypoint="sh", command=["-c", "while :; do :; done"], detach=True,
        nano_cpus=500_000_000, cpuset_cpus="0", mem_limit="64m", labels={"sdlocal.test": "sysmetrics"})
    try:
        container.reload()
        pid = container.attrs["State"]["Pid"]
        c = ContainerCollector(pid)
        assert (c.cores, c.quota, c.per_core) == ([0], 0.5, False)
        c.sample()
        time.sleep(1.5)
        got = figures(c.sample())
        cpu = [v for (t, _, d), v in got.items() if d == "CPUUtilization"]
        # A busy loop uses most of its half core on an idle machine; on a shared one it still gets a
        # clear share (an idle container reads ~0).
        assert len(cpu) == 1 and cpu[0] > 10.0
        stats = container.stats(stream=False)
        mem = stats["memory_stats"]
        assert mem["limit"] == 64 * 1024**2
        theirs = 100.0 * (mem["usage"] - mem["stats"].get("total_inactive_file", mem["stats"].get("inactive_file", 0))) / mem["limit"]
        assert got[("memory", "MemoryUsedPercent", "")] == pytest.approx(theirs, abs=2.0)
    finally:
        container.remove(force=True)
