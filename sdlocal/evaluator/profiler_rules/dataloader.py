"""Dataloader: too few or too many data-loading processes for the CPU cores."""
from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from sdlocal.evaluator.errors import RuleParameterError
from sdlocal.evaluator.params import parse_float
from sdlocal.evaluator.profiler_rule import DEFAULT_SCAN_INTERVAL_US, ProfilerRule
from sdlocal.evaluator.profiler_rules import _stats, _system
from sdlocal.evaluator.rule import Verdict
from sdlocal.trial.profiler.names import DATALOADER_INITIALIZE, DATALOADER_ITER, DATALOADER_WORKER


def median_of(counts: Counter[int]) -> float:
    """The median of a multiset of small integers given as value -> count (numpy's: the mean of
    the two middle values when the count is even)."""
    n = sum(counts.values())
    lo_pos, hi_pos = (n - 1) // 2, n // 2
    seen, lo, hi = 0, None, None
    for value in sorted(counts):
        seen += counts[value]
        if lo is None and seen > lo_pos:
            lo = value
        if seen > hi_pos:
            hi = value
            break
    assert lo is not None and hi is not None
    return (lo + hi) / 2


class Dataloader(ProfilerRule):
    """Fires when the number of parallel data-loading processes is below `min_threshold` % or above
    `max_threshold` % of the CPU cores.

    Choices: the number of data-loading processes behind a batch is the `num_workers` its
    iterator records (args of the hook's `DataLoaderIter` events; 0 = the training process loads
    its own batches), or, for events without it, the worker processes (`DataLoaderWorker`,
    distinct `pid`) alive while the batch was fetched. The figure judged is the median over the
    batches read so far (the loader that serves most batches counts most), at every batch, so
    windows of data do not change the verdict. The cores are the CPU series of the system metrics
    (a container's cpuset under docker); batches read before any system sample are counted but
    not judged. No data-loading events (the hook's DataloaderProfilingConfig is off): nothing to
    judge.
    Details: cores, dataloaders (the median), num_workers {value: batches}, pin_memory (last seen),
    dataloading_time (s: p25, p50, p95, probs, binedges of the batch fetch times).
    """

    group = "profiler"

    def __init__(self, base_trial: Any, min_threshold: object = 70, max_threshold: object = 200,
                 scan_interval_us: object = DEFAULT_SCAN_INTERVAL_US) -> None:
        super().__init__(base_trial, scan_interval_us=scan_interval_us)
        rule = self.rule_name
        self.min_threshold = float(parse_float(rule, "min_threshold", min_threshold, minimum=0))  # type: ignore[arg-type]
        self.max_threshold = float(parse_float(rule, "max_threshold", max_threshold, minimum=0))  # type: ignore[arg-type]
        if self.max_threshold < self.min_threshold:
            raise RuleParameterError(rule, "max_threshold", max_threshold,
                                     f"must be >= min_threshold ({self.min_threshold:g})")
        self.set_rule_parameters(min_threshold=self.min_threshold, max_threshold=self.max_threshold)
        self._workers: Counter[int] = Counter()
        self._fetch_s: list[float] = []

    def invoke_at_window(self, start_us: int, end_us: int) -> Verdict:
        framework = self.trial.framework
        batches = [e for e in framework.events(start_us, end_us, phase=DATALOADER_ITER) if start_us <= e.end_us < end_us]
        for event in framework.events(start_us, end_us, phase=DATALOADER_INITIALIZE):
            if event.args and "pin_memory" in event.args:
                self.report["Details"]["pin_memory"] = bool(event.args["pin_memory"])
        if not batches:
            return Verdict.NOT_EVALUATED
        cores = _system.cores(self.trial.system)
        workers = [self._loaders(e) for e in batches]
        verdict = Verdict.NOT_EVALUATED
        met_at: list[int] = []
        for event, n in zip(batches, workers, strict=True):
            self._workers[n] += 1
            self._fetch_s.append(event.duration_us / 1e6)
            if event.args and "pin_memory" in event.args:
                self.report["Details"]["pin_memory"] = bool(event.args["pin_memory"])
            if not cores:
                continue
            median = median_of(self._workers)
            if median < cores * self.min_threshold / 100 or median > cores * self.max_threshold / 100:
                met_at.append(event.end_us)
                verdict = Verdict.CONDITION_MET
            elif verdict is Verdict.NOT_EVALUATED:
                verdict = Verdict.CONDITION_NOT_MET
        self.report["Datapoints"] += len(batches)
        self.record_violations(met_at)
        details = self.report["Details"]
        details["cores"] = cores
        details["dataloaders"] = median_of(self._workers)
        details["num_workers"] = {str(k): v for k, v in sorted(self._workers.items())}
        fetch = np.asarray(self._fetch_s)
        p25, p50, p95 = np.quantile(fetch, [0.25, 0.5, 0.95])
        details["dataloading_time"] = {"p25": float(p25), "p50": float(p50), "p95": float(p95),
                                       **_stats.histogram(fetch)}
        return verdict

    def _loaders(self, batch: Any) -> int:
        args = batch.args or {}
        if "num_workers" in args:
            try:
                return max(0, int(args["num_workers"]))
            except (TypeError, ValueError):
                pass
        alive = self.trial.framework.events(batch.start_us, batch.end_us + 1, phase=DATALOADER_WORKER)
        return len({(e.node, (e.args or {}).get("pid", e.pid)) for e in alive})
