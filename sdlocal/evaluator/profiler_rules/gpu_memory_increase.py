"""GPUMemoryIncrease: a GPU's memory use keeps rising."""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from sdlocal.evaluator.params import parse_float, parse_int
from sdlocal.evaluator.profiler_rule import DEFAULT_SCAN_INTERVAL_US, ProfilerRule
from sdlocal.evaluator.profiler_rules import _stats, _system
from sdlocal.evaluator.profiler_trial import SYSTEM
from sdlocal.evaluator.rule import Verdict


class GPUMemoryIncrease(ProfilerRule):
    """Fires when the moving mean of a GPU's memory utilization rose by more than `increase`
    percentage points: the mean of its last `window` samples against the mean of the `window`
    samples before them.

    Choices: `increase` is absolute (percentage points of memory utilization, 40 % -> 46 % is 6),
    as SageMaker's docs describe it; the two moving means are adjacent and do not overlap, so a
    jump is seen within 2 x `window` samples and a slow leak only if it grows faster than
    `increase` per `window` samples. Judged at every sample once more than `patience` samples of
    that GPU are in and 2 x `window` exist. No GPU metrics: nothing to judge.
    Details, per node and GPU: max_increase seen, the latest increase, and box-plot figures of
    the memory utilization.
    """

    group = "profiler"
    streams: ClassVar[frozenset[str]] = frozenset({SYSTEM})

    def __init__(self, base_trial: Any, increase: object = 5, patience: object = 1000, window: object = 10,
                 scan_interval_us: object = DEFAULT_SCAN_INTERVAL_US) -> None:
        super().__init__(base_trial, scan_interval_us=scan_interval_us)
        rule = self.rule_name
        self.increase = float(parse_float(rule, "increase", increase, minimum=0, maximum=100))  # type: ignore[arg-type]
        self.patience = int(parse_int(rule, "patience", patience, minimum=0))  # type: ignore[arg-type]
        self.window = int(parse_int(rule, "window", window, minimum=1))  # type: ignore[arg-type]
        self.set_rule_parameters(increase=self.increase, patience=self.patience, window=self.window)
        self._max_increase: dict[tuple[str, str], float] = {}

    def invoke_at_window(self, start_us: int, end_us: int) -> Verdict:
        system = self.trial.system
        verdict = Verdict.NOT_EVALUATED
        w = self.window
        for node in system.nodes():
            for key in _system.gpu_memory_keys(system, node):
                series = system.series(key, None, end_us)
                first = int(np.searchsorted(series.timestamps_us, start_us, side="left"))
                values = series.values
                n = values.size
                if first >= n:
                    continue
                self.report["Datapoints"] += n - first
                idx = np.arange(first, n)  # sample i: the windows (i-w, i] and (i-2w, i-w]
                judged = (idx + 1 > self.patience) & (idx + 1 >= 2 * w)
                if not judged.any():
                    continue
                sums = np.concatenate(([0.0], np.cumsum(values)))
                i = idx[judged]
                now = (sums[i + 1] - sums[i + 1 - w]) / w
                before = (sums[i + 1 - w] - sums[i + 1 - 2 * w]) / w
                rise = now - before
                met = rise > self.increase
                self.record_violations(series.timestamps_us[i[met]].tolist())
                verdict = Verdict.CONDITION_MET if met.any() or verdict.fired else Verdict.CONDITION_NOT_MET
                top = max(self._max_increase.get((node, key.name), float("-inf")), float(rise.max()))
                self._max_increase[(node, key.name)] = top
                self.report["Details"].setdefault(node, {})[key.name] = {
                    "max_increase": round(top, 4), "increase": round(float(rise[-1]), 4), **_stats.box(values)}
        return verdict
