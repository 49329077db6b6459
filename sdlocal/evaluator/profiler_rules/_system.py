"""System-metric views the profiler rules share, per node: the CPU cores, the GPUs, and figures
of one sampling instant side by side (`SystemMetrics.aligned`)."""
from __future__ import annotations

import numpy as np

from sdlocal.trial.profiler import SeriesKey, SystemMetrics
from sdlocal.trial.profiler.names import (
    CPU_TYPE,
    CPU_UTILIZATION,
    GPU_MEMORY_UTILIZATION,
    GPU_TYPE,
    GPU_UTILIZATION,
    IO_WAIT,
)


def cpu_keys(system: SystemMetrics, node: str, dimension: str = CPU_UTILIZATION) -> list[SeriesKey]:
    return system.keys(type=CPU_TYPE, dimension=dimension, node=node)


def gpu_keys(system: SystemMetrics, node: str, dimension: str = GPU_UTILIZATION) -> list[SeriesKey]:
    return system.keys(type=GPU_TYPE, dimension=dimension, node=node)


def gpu_memory_keys(system: SystemMetrics, node: str) -> list[SeriesKey]:
    return gpu_keys(system, node, GPU_MEMORY_UTILIZATION)


def io_wait_keys(system: SystemMetrics, node: str) -> list[SeriesKey]:
    return cpu_keys(system, node, IO_WAIT)


def cores(system: SystemMetrics) -> int:
    """The CPU cores of the node that has the most (the sampler writes one series per core: a
    container's cpuset under docker)."""
    return max((len(cpu_keys(system, node)) for node in system.nodes()), default=0)


def _reduce(matrix: np.ndarray, how: str) -> np.ndarray:
    """Per row, ignoring NaN (a series without a sample at that instant); NaN for an empty row."""
    out = np.full(matrix.shape[0], np.nan)
    has = np.isfinite(matrix).any(axis=1)
    if has.any():
        rows = matrix[has]
        out[has] = np.nanmax(rows, axis=1) if how == "max" else (
            np.nanmin(rows, axis=1) if how == "min" else np.nanmean(rows, axis=1))
    return out


def instants(system: SystemMetrics, groups: list[list[SeriesKey]], hows: list[str], start_us: int | None,
             end_us: int | None) -> tuple[np.ndarray, np.ndarray]:
    """The sampling instants in [start_us, end_us) at which every group has a figure: timestamps
    and a matrix with one column per group, each group of series reduced by its `how` ("max",
    "min", "mean") at that instant."""
    keys = [k for g in groups for k in g]
    if not keys or any(not g for g in groups):
        return np.empty(0, np.int64), np.empty((0, len(groups)))
    stamps, matrix = system.aligned(keys, start_us, end_us)
    cols = []
    at = 0
    for group, how in zip(groups, hows, strict=True):
        cols.append(_reduce(matrix[:, at:at + len(group)], how))
        at += len(group)
    out = np.column_stack(cols) if cols else np.empty((stamps.size, 0))
    keep = np.isfinite(out).all(axis=1)
    return stamps[keep], out[keep]
