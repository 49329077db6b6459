"""LowGPUUtilization: a GPU mostly idle, or swinging between idle and busy."""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from sdlocal.evaluator.params import parse_float, parse_int
from sdlocal.evaluator.profiler_rule import DEFAULT_SCAN_INTERVAL_US, ProfilerRule
from sdlocal.evaluator.profiler_rules import _stats, _system
from sdlocal.evaluator.profiler_trial import SYSTEM
from sdlocal.evaluator.rule import Verdict


class LowGPUUtilization(ProfilerRule):
    """Fires, per GPU, when over its last `window` samples the p95 of utilization is below
    `threshold_p95` (underused), or the p95 is above `threshold_p95` and the p5 below
    `threshold_p5` (fluctuating: busy, then waiting).

    Choices: judged at every sample of a GPU once more than `patience` of its samples are in,
    over its last `window` samples (all of them while fewer exist); a p95 exactly at
    `threshold_p95` is neither underused nor fluctuating. An unused GPU (0 % throughout) is
    underused. No GPU metrics: nothing to judge.
    Details, per node and GPU: underutilized and fluctuating (samples at which each held), gpu_95
    and gpu_5 (the latest window's), and box-plot figures of all its samples.
    """

    group = "profiler"
    streams: ClassVar[frozenset[str]] = frozenset({SYSTEM})

    def __init__(self, base_trial: Any, threshold_p95: object = 70, threshold_p5: object = 10,
                 window: object = 500, patience: object = 1000,
                 scan_interval_us: object = DEFAULT_SCAN_INTERVAL_US) -> None:
        super().__init__(base_trial, scan_interval_us=scan_interval_us)
        rule = self.rule_name
        self.threshold_p95 = float(parse_float(rule, "threshold_p95", threshold_p95, minimum=0, maximum=100))  # type: ignore[arg-type]
        self.threshold_p5 = float(parse_float(rule, "threshold_p5", threshold_p5, minimum=0, maximum=100))  # type: ignore[arg-type]
        self.window = int(parse_int(rule, "window", window, minimum=1))  # type: ignore[arg-type]
        self.patience = int(parse_int(rule, "patience", patience, minimum=0))  # type: ignore[arg-type]
        self.set_rule_parameters(threshold_p95=self.threshold_p95, threshold_p5=self.threshold_p5,
                                 window=self.window, patience=self.patience)
        self._counts: dict[tuple[str, str], list[int]] = {}  # (node, gpu) -> [underutilized, fluctuating]

    def invoke_at_window(self, start_us: int, end_us: int) -> Verdict:
        system = self.trial.system
        verdict = Verdict.NOT_EVALUATED
        for node in system.nodes():
            for key in _system.gpu_keys(system, node):
                series = system.series(key, None, end_us)
                first = int(np.searchsorted(series.timestamps_us, start_us, side="left"))
                n = series.values.size
                if first >= n:
                    continue
                self.report["Datapoints"] += n - first
                ends = np.arange(first + 1, n + 1)
                judged = ends > self.patience
                if not judged.any():
                    continue
                ends = ends[judged]
                q = _stats.trailing_quantiles(series.values, ends, self.window, [0.95, 0.05])
                p95, p5 = q[:, 0], q[:, 1]
                under = p95 < self.threshold_p95
                swings = (p95 > self.threshold_p95) & (p5 < self.threshold_p5)
                met = under | swings
                self.record_violations(series.timestamps_us[ends[met] - 1].tolist())
                verdict = Verdict.CONDITION_MET if met.any() or verdict.fired else Verdict.CONDITION_NOT_MET
                counts = self._counts.setdefault((node, key.name), [0, 0])
                counts[0] += int(under.sum())
                counts[1] += int(swings.sum())
                self.report["Details"].setdefault(node, {})[key.name] = {
                    "underutilized": counts[0], "fluctuating": counts[1],
                    "gpu_95": round(float(p95[-1]), 4), "gpu_5": round(float(p5[-1]), 4),
                    **_stats.box(series.values)}
        return verdict
