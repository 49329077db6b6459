"""The limits a machine sets on saving tensors, measured by benchmarks/gpu_hook.py: how fast bytes
leave the device (device-to-host into pinned memory; on CPU, a host-to-host copy) and how fast the
output folder takes a sequential write (buffered, as the hook writes; and with fsync)."""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import torch


@dataclass(frozen=True)
class Floor:
    copy_gbps: float  # 1e9 bytes/s, median
    copy_kind: str
    write_gbps: float  # buffered sequential write, median
    write_fsync_gbps: float
    probe_bytes: int

    def ms_per_saved_step(self, nbytes: int) -> tuple[float, float]:
        """(copy floor, write floor) of one saved step of `nbytes`, in ms."""
        return 1e3 * nbytes / (self.copy_gbps * 1e9), 1e3 * nbytes / (self.write_gbps * 1e9)


def copy_bandwidth(device: torch.device, nbytes: int, repeats: int = 5) -> tuple[float, str]:
    """Median GB/s of copying `nbytes` from the device into host memory (pinned on CUDA)."""
    n = nbytes // 4
    if device.type == "cuda":
        src = torch.ones(n, device=device)
        dst = torch.empty(n, pin_memory=True)
        times = []
        for _ in range(repeats + 1):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            dst.copy_(src, non_blocking=True)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        del src, dst
        torch.cuda.empty_cache()
        return nbytes / statistics.median(times[1:]) / 1e9, "device-to-host, pinned"
    src = torch.ones(n)
    dst = torch.empty(n)
    dst.copy_(src)  # first touch outside the timing
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        dst.copy_(src)
        times.append(time.perf_counter() - began)
    return nbytes / statistics.median(times) / 1e9, "host-to-host copy (CPU device)"


def write_bandwidth(folder: Path, nbytes: int, repeats: int = 3, chunk: int = 8 << 20) -> tuple[float, float]:
    """Median GB/s of writing `nbytes` sequentially into a new file of `folder`: buffered (closed,
    not synced: what the hook's writes cost it) and fsync'ed (what the disk sustains)."""
    block = os.urandom(chunk)
    buffered, synced = [], []
    path = folder / "sdlocal-write-probe.bin"
    try:
        for _ in range(repeats):
            # the synced write first: the buffered one then starts with no dirty pages of ours pending
            for sync, out in ((True, synced), (False, buffered)):
                began = time.perf_counter()
                with open(path, "wb") as f:
                    left = nbytes
                    while left > 0:
                        f.write(block[:min(chunk, left)])
                        left -= chunk
                    if sync:
                        f.flush()
                        os.fsync(f.fileno())
                out.append(time.perf_counter() - began)
                path.unlink()
    finally:
        path.unlink(missing_ok=True)
    return nbytes / statistics.median(buffered) / 1e9, nbytes / statistics.median(synced) / 1e9


def measure(device: torch.device, folder: Path, probe_bytes: int) -> Floor:
    copy_gbps, kind = copy_bandwidth(device, probe_bytes)
    write_gbps, fsync_gbps = write_bandwidth(folder, probe_bytes)
    return Floor(copy_gbps, kind, write_gbps, fsync_gbps, probe_bytes)
