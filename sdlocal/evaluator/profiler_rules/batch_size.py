"""BatchSize: CPU, GPU and GPU memory all lightly used: the batch could be larger."""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from sdlocal.evaluator.params import parse_float, parse_int
from sdlocal.evaluator.profiler_rule import DEFAULT_SCAN_INTERVAL_US, ProfilerRule
from sdlocal.evaluator.profiler_rules import _stats, _system
from sdlocal.evaluator.profiler_trial import SYSTEM
from sdlocal.evaluator.rule import Verdict


class BatchSize(ProfilerRule):
    """Fires when, over the last `window` datapoints, the p95 of the total CPU utilization is below
    `cpu_threshold_p95` and, for some GPU, the p95 of its utilization is below
    `gpu_threshold_p95` and the p95 of its memory utilization below `gpu_memory_threshold_p95`.

    Choices: a datapoint is a sampling instant of a node's CPU; "total CPU" is the mean over its
    cores; a GPU's windows are its own last `window` samples taken at or before that instant
    (fewer at the start). Judged at every instant after the first `patience` ones, so windows of
    data do not change the verdict. A node without GPU metrics is not judged (the rule is about
    GPUs left idle by small batches): NoIssuesFound without a GPU.
    Details, per node: "cpu" and per GPU "<gpu>" (utilization) and "<gpu>_memory" box-plot figures
    (p25, p50, p75, p95, upper, lower, min, max) over all its data.
    """

    group = "profiler"
    streams: ClassVar[frozenset[str]] = frozenset({SYSTEM})

    def __init__(self, base_trial: Any, cpu_threshold_p95: object = 70, gpu_threshold_p95: object = 70,
                 gpu_memory_threshold_p95: object = 70, patience: object = 1000, window: object = 500,
                 scan_interval_us: object = DEFAULT_SCAN_INTERVAL_US) -> None:
        super().__init__(base_trial, scan_interval_us=scan_interval_us)
        rule = self.rule_name

        def percent(name: str, value: object) -> float:
            return float(parse_float(rule, name, value, minimum=0, maximum=100))  # type: ignore[arg-type]

        self.cpu_threshold_p95 = percent("cpu_threshold_p95", cpu_threshold_p95)
        self.gpu_threshold_p95 = percent("gpu_threshold_p95", gpu_threshold_p95)
        self.gpu_memory_threshold_p95 = percent("gpu_memory_threshold_p95", gpu_memory_threshold_p95)
        self.patience = int(parse_int(rule, "patience", patience, minimum=0))  # type: ignore[arg-type]
        self.window = int(parse_int(rule, "window", window, minimum=1))  # type: ignore[arg-type]
        self.set_rule_parameters(cpu_threshold_p95=self.cpu_threshold_p95, gpu_threshold_p95=self.gpu_threshold_p95,
                                 gpu_memory_threshold_p95=self.gpu_memory_threshold_p95, patience=self.patience,
                                 window=self.window)
        self._cpu: dict[str, list[float]] = {}  # per node: total CPU of every instant so far

    def invoke_at_window(self, start_us: int, end_us: int) -> Verdict:
        system = self.trial.system
        verdict = Verdict.NOT_EVALUATED
        for node in system.nodes():
            gpus = _system.gpu_keys(system, node)
            mems = {k.name: k for k in _system.gpu_memory_keys(system, node)}
            stamps, figures = _system.instants(system, [_system.cpu_keys(system, node)], ["mean"], start_us, end_us)
            if stamps.size == 0 or not gpus:
                continue
            history = self._cpu.setdefault(node, [])
            first = len(history)
            history.extend(figures[:, 0].tolist())
            cpu = np.asarray(history)
            ends = np.arange(first + 1, len(history) + 1)
            cpu_p95 = _stats.trailing_quantiles(cpu, ends, self.window, [0.95])[:, 0]
            judged = ends > self.patience
            low_gpu = np.zeros(stamps.size, dtype=bool)
            for key in gpus:
                mem_key = mems.get(key.name)
                if mem_key is None:
                    continue
                util_p95 = self._gpu_p95(key, stamps, end_us)
                mem_p95 = self._gpu_p95(mem_key, stamps, end_us)
                low_gpu |= (util_p95 < self.gpu_threshold_p95) & (mem_p95 < self.gpu_memory_threshold_p95)
            met = judged & (cpu_p95 < self.cpu_threshold_p95) & low_gpu
            self.report["Datapoints"] += int(stamps.size)
            self.record_violations(stamps[met].tolist())
            if met.any():
                verdict = Verdict.CONDITION_MET
            elif judged.any() and verdict is Verdict.NOT_EVALUATED:
                verdict = Verdict.CONDITION_NOT_MET
            details: dict[str, Any] = {"cpu": _stats.box(cpu)}
            for key in gpus:
                details[key.name] = _stats.box(system.series(key, None, end_us).values)
                if key.name in mems:
                    details[f"{key.name}_memory"] = _stats.box(system.series(mems[key.name], None, end_us).values)
            self.report["Details"][node] = details
        return verdict

    def _gpu_p95(self, key: Any, stamps: np.ndarray, end_us: int) -> np.ndarray:
        series = self.trial.system.series(key, None, end_us)
        ends = np.searchsorted(series.timestamps_us, stamps, side="right")
        return _stats.trailing_quantiles(series.values, ends, self.window, [0.95])[:, 0]
