"""OverallSystemUsage: what the job used of the machine (never fires)."""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from sdlocal.evaluator.profiler_rule import DEFAULT_SCAN_INTERVAL_US, ProfilerRule
from sdlocal.evaluator.profiler_rules import _stats, _system
from sdlocal.evaluator.profiler_trial import SYSTEM
from sdlocal.evaluator.rule import Verdict
from sdlocal.trial.profiler.names import IO_TYPE, MEMORY_TYPE, NETWORK_TYPE


class OverallSystemUsage(ProfilerRule):
    """Never fires; reports p50, p95, p99, min and max of the system metrics, per node.

    Details: {node: {metric: {"p50", "p95", "p99", "min", "max"}}} with metrics "cpu" (total: mean
    over cores per instant), "cpu_busiest_core", "io_wait" (mean over cores), "memory"
    (MemoryUsedPercent), "<gpu>" (GPUUtilization) and "<gpu>_memory" (GPUMemoryUtilization) per
    GPU, and the network and i/o figures as "<type>/<name>" ("network/ReceiveBytesPerSecond",
    "i/o/IOPS", ...: bytes per second, operations per second),
    over all the data read so far. Datapoints: the samples read.
    """

    group = "profiler"
    streams: ClassVar[frozenset[str]] = frozenset({SYSTEM})

    def __init__(self, base_trial: Any, scan_interval_us: object = DEFAULT_SCAN_INTERVAL_US) -> None:
        super().__init__(base_trial, scan_interval_us=scan_interval_us)
        self.set_rule_parameters()

    def invoke_at_window(self, start_us: int, end_us: int) -> Verdict:
        system = self.trial.system
        if not len(system):
            return Verdict.NOT_EVALUATED
        self.report["Datapoints"] = len(system)
        for node in system.nodes():
            self.report["Details"][node] = usage(system, node, end_us)
        return Verdict.CONDITION_NOT_MET


def usage(system: Any, node: str, end_us: int | None) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    cores = _system.cpu_keys(system, node)
    if cores:
        _, figures = _system.instants(system, [cores, cores], ["mean", "max"], None, end_us)
        out["cpu"] = _stats.summary(figures[:, 0])
        out["cpu_busiest_core"] = _stats.summary(figures[:, 1])
    waits = _system.io_wait_keys(system, node)
    if waits:
        out["io_wait"] = _stats.summary(_system.instants(system, [waits], ["mean"], None, end_us)[1][:, 0])
    for key in system.keys(type=MEMORY_TYPE, node=node):
        out["memory"] = _stats.summary(system.series(key, None, end_us).values)
    for key in _system.gpu_keys(system, node):
        out[key.name] = _stats.summary(system.series(key, None, end_us).values)
    for key in _system.gpu_memory_keys(system, node):
        out[f"{key.name}_memory"] = _stats.summary(system.series(key, None, end_us).values)
    for kind in (NETWORK_TYPE, IO_TYPE):
        for key in system.keys(type=kind, node=node):
            label = "/".join(part for part in (key.name, key.dimension) if part and part != "Algorithm")
            values = system.series(key, None, end_us).values
            out[f"{kind}/{label}"] = _stats.summary(values[np.isfinite(values)])
    return {k: v for k, v in out.items() if v}
