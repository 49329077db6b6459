"""LoadBalancing: GPUs of one job doing unequal work."""
from __future__ import annotations

from itertools import combinations
from typing import Any, ClassVar

import numpy as np

from sdlocal.evaluator.params import parse_float, parse_int
from sdlocal.evaluator.profiler_rule import DEFAULT_SCAN_INTERVAL_US, ProfilerRule
from sdlocal.evaluator.profiler_rules import _system
from sdlocal.evaluator.profiler_trial import SYSTEM
from sdlocal.evaluator.rule import Verdict

BIN_WIDTH = 2.0  # % of utilization
BINS = np.linspace(0.0, 100.0, int(100 / BIN_WIDTH) + 1)  # 50 bins, the last one [98, 100]


def js_distance(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Jensen-Shannon distance (natural log: 0 .. sqrt(ln 2) = 0.83) between histograms along the
    last axis (counts, normalized here); NaN where either histogram is empty."""
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = p / p.sum(axis=-1, keepdims=True)
        q = q / q.sum(axis=-1, keepdims=True)
        m = (p + q) / 2

        def kl(a: np.ndarray) -> np.ndarray:
            return np.where(a > 0, a * np.log(a / m), 0.0).sum(axis=-1)  # type: ignore[no-any-return]

        return np.sqrt(np.maximum((kl(p) + kl(q)) / 2, 0.0))


class LoadBalancing(ProfilerRule):
    """Fires when the Jensen-Shannon distance between the utilization histograms of two GPUs is
    above `threshold`, for any pair of the job's GPUs.

    Every pair is compared (SageMaker's original compared the last GPU with itself and never
    fired). Choices: each GPU's histogram counts all its utilization samples so far in 50 bins of
    2 % (the last bin holds 98-100 %); the distance uses the natural logarithm, so it lies between
    0 (same workload) and 0.83 (disjoint); a pair is judged at every sample instant once both GPUs
    have more than `patience` samples (rules.md's default, 10; smdebug_rulesconfig's, which the
    SDK sends, is 1000) and at least `min_samples` (sdlocal's parameter, 100): two histograms of
    the same workload drawn from fewer samples differ by more than 0.5 through sampling noise
    alone (measured: 11 samples of 70 +- 8 % give up to 0.75, 100 samples 0.31), so with
    patience 10 alone ProfilerReport would flag every multi-GPU job at its start. GPUs of
    different nodes are compared too. Fewer than two GPUs: nothing to judge.
    Details: "workloads" (each GPU's histogram counts, key "<node>/<gpu>"), "bins" (edges),
    "distances" ({gpu: {other gpu: latest distance}}) and "max_distance".
    """

    group = "profiler"
    streams: ClassVar[frozenset[str]] = frozenset({SYSTEM})

    def __init__(self, base_trial: Any, threshold: object = 0.5, patience: object = 10, min_samples: object = 100,
                 scan_interval_us: object = DEFAULT_SCAN_INTERVAL_US) -> None:
        super().__init__(base_trial, scan_interval_us=scan_interval_us)
        rule = self.rule_name
        self.threshold = float(parse_float(rule, "threshold", threshold, minimum=0))  # type: ignore[arg-type]
        self.patience = int(parse_int(rule, "patience", patience, minimum=0))  # type: ignore[arg-type]
        self.min_samples = int(parse_int(rule, "min_samples", min_samples, minimum=0))  # type: ignore[arg-type]
        self.set_rule_parameters(threshold=self.threshold, patience=self.patience, min_samples=self.min_samples)
        self._hist: dict[str, np.ndarray] = {}  # "<node>/<gpu>" -> counts up to the last window
        self._samples: dict[str, int] = {}
        self._max_distance = 0.0

    def invoke_at_window(self, start_us: int, end_us: int) -> Verdict:
        system = self.trial.system
        window: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # gpu -> (timestamps, bin index)
        for node in system.nodes():
            for key in _system.gpu_keys(system, node):
                series = system.series(key, start_us, end_us)
                name = f"{node}/{key.name}"
                self._hist.setdefault(name, np.zeros(BINS.size - 1, dtype=np.int64))
                self._samples.setdefault(name, 0)
                bins = np.clip(np.searchsorted(BINS, series.values, side="right") - 1, 0, BINS.size - 2)
                window[name] = (series.timestamps_us, bins)
        if len(self._hist) < 2:
            for name, (stamps, bins) in window.items():
                self._add(name, stamps, bins)
            return Verdict.NOT_EVALUATED
        names = sorted(self._hist)
        stamps = np.unique(np.concatenate([window.get(n, (np.empty(0, np.int64),))[0] for n in names]))
        if stamps.size == 0:
            return Verdict.NOT_EVALUATED
        # each GPU's histogram and sample count at every instant of the window
        hists: dict[str, np.ndarray] = {}
        counts: dict[str, np.ndarray] = {}
        for name in names:
            ts, bins = window.get(name, (np.empty(0, np.int64), np.empty(0, np.int64)))
            steps = np.zeros((ts.size + 1, BINS.size - 1), dtype=np.int64)
            steps[0] = self._hist[name]
            if ts.size:
                steps[np.arange(1, ts.size + 1), bins] += 1
            cumulative = np.cumsum(steps, axis=0)
            upto = np.searchsorted(ts, stamps, side="right")
            hists[name] = cumulative[upto]
            counts[name] = self._samples[name] + upto
            self._add(name, ts, bins)
        met = np.zeros(stamps.size, dtype=bool)
        judged = np.zeros(stamps.size, dtype=bool)
        distances: dict[str, dict[str, float]] = self.report["Details"].setdefault("distances", {})
        for a, b in combinations(names, 2):
            enough = np.minimum(counts[a], counts[b])
            ready = (enough > self.patience) & (enough >= self.min_samples)
            if not ready.any():
                continue
            d = js_distance(hists[a][ready], hists[b][ready])
            judged |= ready
            met[np.flatnonzero(ready)[d > self.threshold]] = True
            distances.setdefault(a, {})[b] = round(float(d[-1]), 4)
            self._max_distance = max(self._max_distance, float(np.nanmax(d)))
        self.report["Datapoints"] += int(stamps.size)
        self.record_violations(stamps[met].tolist())
        self.report["Details"]["max_distance"] = round(self._max_distance, 4)
        if met.any():
            return Verdict.CONDITION_MET
        return Verdict.CONDITION_NOT_MET if judged.any() else Verdict.NOT_EVALUATED

    def _add(self, name: str, stamps: np.ndarray, bins: np.ndarray) -> None:
        np.add.at(self._hist[name], bins, 1)
        self._samples[name] += int(stamps.size)
        self.report["Details"].setdefault("workloads", {})[name] = self._hist[name].tolist()
        self.report["Details"]["bins"] = BINS.tolist()
