"""MaxInitializationTime: the training loop starts too late."""
from __future__ import annotations

from typing import Any

from sdlocal.evaluator.params import parse_float
from sdlocal.evaluator.profiler_rule import DEFAULT_SCAN_INTERVAL_US, ProfilerRule
from sdlocal.evaluator.rule import Verdict


class MaxInitializationTime(ProfilerRule):
    """Fires when no training step has started `threshold` minutes after the job started.

    Choices: the job starts at the first profiler datapoint (system sample or framework event);
    a step is any `Step:ModeKeys.*` event of the framework trace. The initialization time is the
    first step's start minus the job's start, decided once the first step event is read: the rule
    fires if it exceeds `threshold`. While no step event is read it fires only once the framework
    data read reaches `threshold` past the start (a first step still running then counts as not
    started). Without any framework data (the hook recorded no framework metrics) nothing says
    when the loop started: not evaluated, NoIssuesFound; when training ended with framework
    data but no step, it fires if the data spans more than `threshold`.
    Details: job_start, first_step (epoch µs), initialization_s, step_num {"first", "last"}
    (start times of the first and latest step events).
    """

    group = "profiler"

    def __init__(self, base_trial: Any, threshold: object = 20,
                 scan_interval_us: object = DEFAULT_SCAN_INTERVAL_US) -> None:
        super().__init__(base_trial, scan_interval_us=scan_interval_us)
        self.threshold = float(parse_float(self.rule_name, "threshold", threshold, minimum=0))  # type: ignore[arg-type]
        self.threshold_us = int(self.threshold * 60_000_000)
        self.set_rule_parameters(threshold=self.threshold)
        self.report["Details"]["step_num"] = {}
        self.decided: bool | None = None  # None until known; then whether it fired

    def _look(self, end_us: int | None, at_end: bool) -> Verdict:
        trial = self.trial
        start = trial.first_timestamp_us()
        if start is None:
            return Verdict.NOT_EVALUATED
        details = self.report["Details"]
        details["job_start"] = start
        steps = trial.framework.steps(end_us=end_us)
        if len(steps):
            self.report["Datapoints"] = len(steps)
            details["step_num"] = {"first": int(steps.start_us[0]), "last": int(steps.start_us[-1])}
        if self.decided is not None:
            return Verdict.NOT_EVALUATED  # judged once: the first step does not change
        if len(steps):
            first = int(steps.start_us[0])
            details["first_step"] = first
            details["initialization_s"] = round((first - start) / 1e6, 3)
            self.decided = first - start > self.threshold_us
            if self.decided:
                self.record_violation(first)
            return Verdict.CONDITION_MET if self.decided else Verdict.CONDITION_NOT_MET
        reached = trial.framework.time_range()
        if reached is None:
            return Verdict.NOT_EVALUATED  # no framework data: nothing says when training started
        # live: as far as the framework data read reaches; at the end, all of the job's data
        horizon = (self.trial.last_timestamp_us() or reached[1]) if at_end else min(reached[1], end_us or reached[1])
        if horizon - start > self.threshold_us:
            self.decided = True
            self.record_violation(start + self.threshold_us)
            return Verdict.CONDITION_MET
        return Verdict.NOT_EVALUATED

    def invoke_at_window(self, start_us: int, end_us: int) -> Verdict:
        return self._look(end_us, at_end=False)

    def invoke_at_end(self) -> Verdict:
        verdict = self._look(None, at_end=True)
        if self.decided is None and self.trial.framework.time_range() is None:
            self.report["Details"]["message"] = "no framework metrics: the start of the training loop is unknown"
        return verdict
