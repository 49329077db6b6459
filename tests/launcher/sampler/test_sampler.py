"""The system monitor: /proc parsing, the host collector, the sampler thread, NVML (faked: no GPU
here) and its absence (for real), and make_sampler writing files the profiler reader reads."""
from __future__ import annotations

import logging
import os
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from sdlocal.launcher.sampler.procfs import (
    parse_cpu_list,
    parse_diskstats,
    parse_meminfo,
    parse_net_dev,
    parse_stat,
)
from sdlocal.launcher.sampler.sampler import (
    CollectorUnavailable,
    HostCollector,
    SystemSampler,
    make_sampler,
    open_gpu_collector,
)
from sdlocal.trial.profiler import ProfilerReader, Sample, SystemMetricsWriter

STAT = """cpu  300 0 100 1000 50 0 0 0 0 0
cpu0 100 0 50 500 25 0 0 0 0 0
cpu1 200 0 50 500 25 0 0 0 0 0
intr 1 2 3
"""
MEMINFO = "MemTotal:       1000 kB\nMemFree:         100 kB\nMemAvailable:    250 kB\n"
NET = """Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 5000 10 0 0 0 0 0 0 5000 10 0 0 0 0 0 0
  eth0: 1000 10 0 0 0 0 0 0 2000 10 0 0 0 0 0 0
  eth1:  500 10 0 0 0 0 0 0  100 10 0 0 0 0 0 0
"""
DISKSTATS = """   8       0 sda 100 0 800 0 50 0 1600 0 0 0 0
   8       1 sda1 100 0 800 0 50 0 1600 0 0 0 0
   7       0 loop0 9 0 9 0 9 0 9 0 0 0 0
"""


def write_proc(root: Path, stat: str = STAT, meminfo: str = MEMINFO, net: str = NET, disk: str = DISKSTATS) -> None:
    (root / "proc" / "net").mkdir(parents=True, exist_ok=True)
    (root / "sys" / "block" / "sda").mkdir(parents=True, exist_ok=True)
    (root / "sys" / "block" / "loop0").mkdir(parents=True, exist_ok=True)
    (root / "proc" / "stat").write_text(stat)
    (root / "proc" / "meminfo").write_text(meminfo)
    (root / "proc" / "net" / "dev").write_text(net)
    (root / "proc" / "diskstats").write_text(disk)


class Clock:
    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_proc_parsers() -> None:
    assert parse_stat(STAT) == {0: (675, 500, 25), 1: (775, 500, 25)}
    assert parse_meminfo(MEMINFO)["MemAvailable"] == 250 * 1024
    assert parse_net_dev(NET) == (1500, 2100)  # lo left out
    assert parse_diskstats(DISKSTATS, {"sda"}) == (800 * 512, 1600 * 512, 150)
    assert parse_cpu_list("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]


def test_host_collector_figures(tmp_path: Path) -> None:
    write_proc(tmp_path)
    clock = Clock()
    c = HostCollector(tmp_path, monotonic=clock)
    assert c.cores == [0, 1] and c.disks == {"sda"}
    first = c.sample()
    assert first == [Sample("memory", "MemoryUsedPercent", "", 75.0)]  # gauges only: no previous counters
    # 2 s later: cpu0 did 50 user + 25 iowait + 25 idle of 100 jiffies; cpu1 only idle.
    write_proc(tmp_path,
               stat=STAT.replace("cpu0 100 0 50 500 25", "cpu0 150 0 50 525 50").replace("cpu1 200 0 50 500 25", "cpu1 200 0 50 600 25"),
               net=NET.replace("eth0: 1000", "eth0: 3000"),
               disk=DISKSTATS.replace("sda 100 0 800", "sda 110 0 1200"))
    clock.t += 2
    got = {(s.type, s.name, s.dimension): s.value for s in c.sample()}
    assert got[("cpu", "cpu0", "CPUUtilization")] == 50.0
    assert got[("cpu", "cpu0", "I/OWaitPercentage")] == 25.0
    assert got[("cpu", "cpu1", "CPUUtilization")] == 0.0
    assert got[("network", "ReceiveBytesPerSecond", "Algorithm")] == 1000.0
    assert got[("network", "TransmitBytesPerSecond", "Algorithm")] == 0.0
    assert got[("i/o", "ReadThroughputInBytesPerSecond", "")] == 400 * 512 / 2
    assert got[("i/o", "IOPS", "")] == 5.0
    assert not any(t == "gpu" for t, _, _ in got)


def test_host_collector_on_this_machine() -> None:
    c = HostCollector()
    c.sample()
    time.sleep(0.2)
    samples = c.sample()
    cores = {s.name for s in samples if s.dimension == "CPUUtilization"}
    assert len(cores) == len(parse_stat(Path("/proc/stat").read_text())) == os.cpu_count()
    assert all(0.0 <= s.value <= 100.0 for s in samples if s.type in ("cpu", "memory"))
    assert next(s.value for s in samples if s.name == "MemoryUsedPercent") > 0


def test_no_proc_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CollectorUnavailable, match="cannot read the host's /proc"):
        HostCollector(tmp_path)


# ---- NVML ---------------------------------------------------------------------------------------
class FakeNvml:
    """The part of pynvml the GPU collector calls: two GPUs; `broken` GPUs raise."""

    def __init__(self, count: int = 2, init_error: Exception | None = None) -> None:
        self.count = count
        self.init_error = init_error
        self.broken: set[int] = set()
        self.shutdowns = 0

    def nvmlInit(self) -> None:
        if self.init_error:
            raise self.init_error

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        return self.count

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetUtilizationRates(self, h: int) -> Any:
        if h in self.broken:
            raise RuntimeError("GPU is lost")
        return SimpleNamespace(gpu=10 * (h + 1), memory=3)

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        return SimpleNamespace(used=(h + 1) * 1024, total=4096, free=4096 - (h + 1) * 1024)


def test_gpu_collector_with_a_fake_nvml(caplog: pytest.LogCaptureFixture) -> None:
    nvml = FakeNvml()
    gpu, why = open_gpu_collector(nvml=nvml)
    assert gpu is not None and why == "" and gpu.gpus == [0, 1]
    assert gpu.sample() == [
        Sample("gpu", "gpu0", "GPUUtilization", 10.0), Sample("gpu", "gpu0", "GPUMemoryUtilization", 25.0),
        Sample("gpu", "gpu1", "GPUUtilization", 20.0), Sample("gpu", "gpu1", "GPUMemoryUtilization", 50.0)]
    nvml.broken.add(0)
    for _ in range(3):
        assert [s.name for s in gpu.sample()] == ["gpu1", "gpu1"]
    assert caplog.text.count("GPU 0: NVML stopped answering") == 1
    gpu.close()
    assert nvml.shutdowns == 1
    only, _ = open_gpu_collector([1, 7], nvml=FakeNvml())
    assert only is not None and only.gpus == [1]


def test_no_gpu_paths() -> None:
    gpu, why = open_gpu_collector(nvml=FakeNvml(init_error=RuntimeError("NVML Shared Library Not Found")))
    assert gpu is None and "NVML did not start (NVML Shared Library Not Found)" in why
    gpu, why = open_gpu_collector(nvml=FakeNvml(count=0))
    assert gpu is None and why == "NVML sees no GPU"


def test_no_gpu_on_this_machine_for_real(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine has no GPU: the real pynvml fails to start (or is not installed)."""
    gpu, why = open_gpu_collector()
    assert gpu is None and ("NVML did not start" in why or "not installed" in why)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # the package missing: import fails
    gpu, why = open_gpu_collector()
    assert gpu is None and why == "the nvidia-ml-py package (pynvml) is not installed"


# ---- the sampler --------------------------------------------------------------------------------
class ListCollector:
    def __init__(self) -> None:
        self.calls = 0
        self.closed = False
        self.fail_every = 0
        self.block: threading.Event | None = None

    def sample(self) -> list[Sample]:
        self.calls += 1
        if self.block is not None:
            self.block.wait(10)
        if self.fail_every and self.calls % self.fail_every == 0:
            raise OSError("counter file vanished")
        return [Sample("cpu", "cpu0", "CPUUtilization", float(self.calls))]

    def close(self) -> None:
        self.closed = True


def test_sampler_writes_each_sample_and_survives_errors(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    collector = ListCollector()
    collector.fail_every = 3
    clock = Clock(1_700_000_000.0)
    sampler = SystemSampler(collector, SystemMetricsWriter(tmp_path), 0.5, clock)
    for _ in range(7):
        sampler.sample_once()
        clock.t += 0.5
    assert (sampler.samples, sampler.lines) == (5, 5)
    assert caplog.text.count("counter file vanished") == 1 and len(sampler.errors) == 1
    sampler.stop()
    sampler.stop()
    assert collector.closed
    reader = ProfilerReader(tmp_path)
    reader.refresh()
    (series,) = reader.system.select(type="cpu").values()
    assert series.values.tolist() == [1.0, 2.0, 4.0, 5.0, 7.0]
    assert series.timestamps_us.tolist() == [int((1_700_000_000 + 0.5 * i) * 1e6) for i in (0, 1, 3, 4, 6)]
    assert sampler.sample_once() == 0  # stopped: nothing more is written


def test_sampler_thread_and_a_stop_deadline(tmp_path: Path) -> None:
    collector = ListCollector()
    sampler = SystemSampler(collector, SystemMetricsWriter(tmp_path, close_interval_s=1), 0.02)
    sampler.start()
    deadline = time.monotonic() + 10
    while sampler.samples < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    collector.block = threading.Event()  # the collector hangs in its next sample
    time.sleep(0.05)
    started = time.monotonic()
    sampler.stop(timeout=0.2)  # returns although the thread is stuck
    assert time.monotonic() - started < 5
    collector.block.set()
    assert sampler.samples >= 5 and not collector.closed  # still in use by the stuck thread
    assert not list(tmp_path.rglob("*.tmp"))  # the open file was closed
    with pytest.raises(RuntimeError):
        sampler.start()


def test_a_slow_sampler_closes_its_file_at_the_periods_end(tmp_path: Path) -> None:
    """Sampling every 30 s with 1-second files: the one sample's file is closed (and so uploadable)
    about a second later, not when the next sample comes."""
    writer = SystemMetricsWriter(tmp_path, close_interval_s=1)
    sampler = SystemSampler(ListCollector(), writer, 30.0)
    sampler.start()
    try:
        deadline = time.monotonic() + 5
        while not writer.closed_files and time.monotonic() < deadline:
            time.sleep(0.02)
        closed_after = time.time()
        assert sampler.samples == 1 and len(writer.closed_files) == 1 and writer.open_until is None
        start = int(writer.closed_files[0].name.split(".")[0])
        assert start + 1 <= closed_after < start + 1.5  # at its period's end (wall clock), not 30 s later
        assert not list(tmp_path.rglob("*.tmp"))
    finally:
        sampler.stop()


def test_make_sampler_on_this_machine(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    sampler = make_sampler(tmp_path / "profiler", 100, close_interval_s=1)
    sampler.start()
    deadline = time.monotonic() + 20
    while sampler.samples < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    sampler.stop()
    assert sampler.errors == []
    gpu_lines = [r for r in caplog.records if "no GPU metrics" in r.getMessage()]
    assert len(gpu_lines) == 1 and gpu_lines[0].levelno == logging.INFO
    reader = ProfilerReader(tmp_path / "profiler")
    reader.refresh()
    assert reader.damage == [] and reader.system.keys(type="gpu") == []
    cores = reader.system.keys(type="cpu", dimension="CPUUtilization")
    assert len(cores) == os.cpu_count()
    assert len(reader.system.keys(type="memory")) == 1 and len(reader.system.keys(type="network")) == 2
    assert len(reader.system.series(cores[0])) == sampler.samples - 1  # rates need a previous sample


def test_the_uploader_only_sees_closed_files(tmp_path: Path, s3_client: Any, bucket: str) -> None:
    """Sampler and trace writer write while the platform's uploader syncs: no .tmp and no partial
    file reaches S3, and the S3 reader finds every line and event once everything is closed."""
    from sdlocal.launcher.upload.uploader import Uploader, UploadTarget
    from sdlocal.trial.profiler import TraceWriter, now_us
    from sdlocal.trial.storage import open_storage

    local = tmp_path / "profiler"
    prefix = f"s3://{bucket}/out/job/profiler-output"
    sampler = SystemSampler(ListCollector(), SystemMetricsWriter(local, close_interval_s=1), 0.01)
    trace = TraceWriter(local, "0-algo-1", close_interval_s=0.3)
    uploader = Uploader([UploadTarget(local, open_storage(prefix, client=s3_client))], interval=0.05)
    uploader.start()
    sampler.start()
    deadline = time.monotonic() + 2.5
    step = 0
    while time.monotonic() < deadline:
        start = now_us()
        time.sleep(0.01)
        trace.record_step("TRAIN", step, start, now_us())
        trace.close_if_due()
        step += 1
    sampler.stop()
    trace.close()
    uploader.finish()
    assert uploader.uploaded and not [u for u in uploader.uploaded if u.endswith(".tmp")]
    assert len(uploader.uploaded) == len(set(uploader.uploaded))  # each closed file once: never rewritten
    reader = ProfilerReader(prefix, s3_client=s3_client)
    result = reader.refresh()
    assert (result.samples, result.events, result.damage, result.partial_lines) == (sampler.lines, step, 0, 0)
    assert reader.framework.steps().step.tolist() == list(range(step))
