"""OverallFrameworkMetrics: where the training time went (never fires)."""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from sdlocal.evaluator.profiler_rule import DEFAULT_SCAN_INTERVAL_US, ProfilerRule
from sdlocal.evaluator.profiler_trial import FRAMEWORK
from sdlocal.evaluator.rule import Verdict
from sdlocal.trial.profiler import step_mode
from sdlocal.trial.profiler.names import BACKWARD_PHASE, DATALOADER_ITER, FORWARD_PHASE

TOP_EVENTS = 10


def union_us(starts: np.ndarray, ends: np.ndarray) -> int:
    """Total length of the union of intervals."""
    if starts.size == 0:
        return 0
    order = np.argsort(starts, kind="stable")
    total, cur_start, cur_end = 0, int(starts[order[0]]), int(ends[order[0]])
    for s, e in zip(starts[order[1:]].tolist(), ends[order[1:]].tolist(), strict=True):
        if s > cur_end:
            total += cur_end - cur_start
            cur_start, cur_end = s, e
        else:
            cur_end = max(cur_end, e)
    return total + cur_end - cur_start


class OverallFrameworkMetrics(ProfilerRule):
    """Never fires; reports how the training time splits between steps and the rest, and between
    forward, backward, data loading and other work.

    Choices: the training time runs from the first framework event's start to the last one's end;
    time in steps is the union of the `Step:ModeKeys.*` events; "forward" and "backward" are the
    hook's `Forward` and `Backward(post-forward)` phases, "dataloading" the training loop waiting
    for batches (`DataLoaderIter`), "other" the rest of the training time (never below 0).
    Details: training_time_s, steps {mode: count}, step_time_s {mode: seconds}, in_steps_s,
    outside_steps_s, phases {phase: seconds}, split_s and split_percent {"forward", "backward",
    "dataloading", "other"}, top_events [{"name", "phase", "total_s", "count"}] (the 10 longest in
    total). Datapoints: the events read.
    """

    group = "profiler"
    streams: ClassVar[frozenset[str]] = frozenset({FRAMEWORK})

    def __init__(self, base_trial: Any, scan_interval_us: object = DEFAULT_SCAN_INTERVAL_US) -> None:
        super().__init__(base_trial, scan_interval_us=scan_interval_us)
        self.set_rule_parameters()
        self._seen = -1

    def invoke_at_window(self, start_us: int, end_us: int) -> Verdict:
        framework = self.trial.framework
        if not len(framework):
            return Verdict.NOT_EVALUATED
        if len(framework) != self._seen:  # recomputed over everything read when new events came
            self._seen = len(framework)
            self.report["Datapoints"] = len(framework)
            self.report["Details"] = breakdown(framework)
        return Verdict.CONDITION_NOT_MET


def breakdown(framework: Any) -> dict[str, Any]:
    a = framework.arrays()
    dur = a.end_us - a.start_us
    training_us = int(a.end_us.max() - a.start_us.min())
    phases = {p: float(dur[a.phase_id == i].sum()) / 1e6 for i, p in enumerate(a.phases)}
    steps: dict[str, int] = {}
    step_time: dict[str, float] = {}
    step_rows = np.zeros(dur.size, dtype=bool)
    for i, phase in enumerate(a.phases):
        mode = step_mode(phase)
        if mode is None:
            continue
        rows = a.phase_id == i
        step_rows |= rows
        steps[mode.name] = steps.get(mode.name, 0) + int(rows.sum())
        step_time[mode.name] = step_time.get(mode.name, 0.0) + float(dur[rows].sum()) / 1e6
    in_steps_us = union_us(a.start_us[step_rows], a.end_us[step_rows])
    split = {"forward": phases.get(FORWARD_PHASE, 0.0), "backward": phases.get(BACKWARD_PHASE, 0.0),
             "dataloading": phases.get(DATALOADER_ITER, 0.0)}
    split["other"] = max(0.0, training_us / 1e6 - sum(split.values()))
    pair = a.phase_id.astype(np.int64) * max(1, len(a.names)) + a.name_id
    total_us = np.bincount(pair, weights=dur)
    count = np.bincount(pair)
    top = [int(i) for i in np.argsort(-total_us, kind="stable")[:TOP_EVENTS] if count[i]]
    return {
        "training_time_s": training_us / 1e6,
        "steps": steps,
        "step_time_s": step_time,
        "in_steps_s": in_steps_us / 1e6,
        "outside_steps_s": max(0, training_us - in_steps_us) / 1e6,
        "phases": phases,
        "split_s": split,
        "split_percent": {k: (100.0 * v * 1e6 / training_us if training_us else 0.0) for k, v in split.items()},
        "top_events": [{"name": a.names[i % max(1, len(a.names))], "phase": a.phases[i // max(1, len(a.names))],
                        "total_s": float(total_us[i]) / 1e6, "count": int(count[i])} for i in top],
    }
