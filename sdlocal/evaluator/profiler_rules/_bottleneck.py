"""CPUBottleneck and IOBottleneck: the GPU waits while the CPU is busy / the disks are slow."""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from sdlocal.evaluator.params import parse_float, parse_int
from sdlocal.evaluator.profiler_rule import DEFAULT_SCAN_INTERVAL_US, ProfilerRule
from sdlocal.evaluator.profiler_rules import _system
from sdlocal.evaluator.profiler_trial import SYSTEM
from sdlocal.evaluator.rule import Verdict
from sdlocal.trial.profiler.names import CPU_UTILIZATION


class _Counts:
    def __init__(self) -> None:
        self.datapoints = 0
        self.bottlenecks = 0
        self.low_gpu = 0


class Bottleneck(ProfilerRule):
    """Shared by CPUBottleneck and IOBottleneck (module docstrings say which figure is busy)."""

    streams: ClassVar[frozenset[str]] = frozenset({SYSTEM})
    busy_dimension: ClassVar[str] = CPU_UTILIZATION
    busy_name: ClassVar[str] = "cpu_threshold"
    busy_label: ClassVar[str] = "CPU"

    def __init__(self, base_trial: Any, threshold: object, gpu_threshold: object, busy_threshold: object,
                 patience: object, scan_interval_us: object = DEFAULT_SCAN_INTERVAL_US) -> None:
        super().__init__(base_trial, scan_interval_us=scan_interval_us)
        rule = self.rule_name
        self.threshold = float(parse_float(rule, "threshold", threshold, minimum=0, maximum=100))  # type: ignore[arg-type]
        self.gpu_threshold = float(parse_float(rule, "gpu_threshold", gpu_threshold, minimum=0, maximum=100))  # type: ignore[arg-type]
        self.busy_threshold = float(parse_float(rule, self.busy_name, busy_threshold, minimum=0, maximum=100))  # type: ignore[arg-type]
        self.patience = int(parse_int(rule, "patience", patience, minimum=0))  # type: ignore[arg-type]
        self.set_rule_parameters(threshold=self.threshold, gpu_threshold=self.gpu_threshold,
                                 **{self.busy_name: self.busy_threshold}, patience=self.patience)
        self._counts: dict[str, _Counts] = {}

    def invoke_at_window(self, start_us: int, end_us: int) -> Verdict:
        system = self.trial.system
        verdict = Verdict.NOT_EVALUATED
        for node in system.nodes():
            busy = _system.cpu_keys(system, node, self.busy_dimension)
            gpus = _system.gpu_keys(system, node)
            stamps, figures = _system.instants(system, [busy, gpus], ["max", "min"], start_us, end_us)
            if stamps.size == 0:
                continue
            counts = self._counts.setdefault(node, _Counts())
            low_gpu = figures[:, 1] < self.gpu_threshold
            bottleneck = low_gpu & (figures[:, 0] > self.busy_threshold)
            n = counts.datapoints + np.arange(1, stamps.size + 1)
            b = counts.bottlenecks + np.cumsum(bottleneck)
            judged = n > self.patience
            met = judged & (b * 100.0 > self.threshold * n)
            counts.datapoints = int(n[-1])
            counts.bottlenecks = int(b[-1])
            counts.low_gpu += int(low_gpu.sum())
            self.report["Datapoints"] += int(stamps.size)
            self.record_violations(stamps[met].tolist())
            if met.any():
                verdict = Verdict.CONDITION_MET
            elif judged.any() and verdict is Verdict.NOT_EVALUATED:
                verdict = Verdict.CONDITION_NOT_MET
            self.report["Details"][node] = {
                "datapoints": counts.datapoints,
                "bottlenecks": counts.bottlenecks,
                "low_gpu_utilization": counts.low_gpu,
                "bottleneck_percent": round(100.0 * counts.bottlenecks / counts.datapoints, 2),
            }
        return verdict
