"""StepOutlier: steps much slower than the others."""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from sdlocal.evaluator.params import parse_float, parse_int, parse_mode
from sdlocal.evaluator.profiler_rule import DEFAULT_SCAN_INTERVAL_US, ProfilerRule
from sdlocal.evaluator.profiler_rules import _stats
from sdlocal.evaluator.profiler_trial import FRAMEWORK
from sdlocal.evaluator.rule import Verdict
from sdlocal.trial.modes import ModeKeys

MIN_STEPS = 100  # "after 100 steps"
MAX_LISTED = 100  # outlier step numbers listed in the report


class StepOutlier(ProfilerRule):
    """Fires when, among the steps of a mode, more than `n_outliers` step durations exceed
    mean + `stddev` x standard deviation, once more than 100 steps of that mode were read.

    Choices: each mode is judged on its own steps (EVAL steps are not TRAIN outliers); `mode`
    (TRAIN, EVAL, PREDICT, GLOBAL; None: every mode) restricts it to one. Steps of every trace
    writer (process) of the job are judged together. The mean and deviation are those of all the
    mode's steps read so far, so outliers are counted again at the end of each window, over every
    step that ended before it: a live evaluation (short windows) also judges intermediate states,
    and may fire on outliers that the statistics of the whole job would no longer call outliers.
    Violations: the outlier steps of the modes that fire.
    Details: step_details {mode: {steps, step_stats {mean, max, p99, p95, p50, min} (s), stddev,
    threshold_s, number_of_outliers, outlier_steps (first 100 step numbers), probs, binedges
    (histogram of the other steps' durations)}}.
    """

    group = "profiler"
    streams: ClassVar[frozenset[str]] = frozenset({FRAMEWORK})

    def __init__(self, base_trial: Any, stddev: object = 3, mode: object = None, n_outliers: object = 10,
                 scan_interval_us: object = DEFAULT_SCAN_INTERVAL_US) -> None:
        super().__init__(base_trial, scan_interval_us=scan_interval_us)
        rule = self.rule_name
        self.stddev = float(parse_float(rule, "stddev", stddev, minimum=0))  # type: ignore[arg-type]
        self.mode: ModeKeys | None = parse_mode(rule, "mode", mode)
        self.n_outliers = int(parse_int(rule, "n_outliers", n_outliers, minimum=0))  # type: ignore[arg-type]
        self.set_rule_parameters(stddev=self.stddev, mode=self.mode.name if self.mode else None,
                                 n_outliers=self.n_outliers)
        self.report["Details"]["step_details"] = {}

    def invoke_at_window(self, start_us: int, end_us: int) -> Verdict:
        steps = self.trial.framework.steps(mode=self.mode)
        done = steps.end_us < end_us
        self.report["Datapoints"] = int(done.sum())
        verdict = Verdict.NOT_EVALUATED
        violations = 0
        for mode in sorted({int(m) for m in steps.mode[done].tolist()}):
            rows = done & (steps.mode == mode)
            durations = steps.duration_us[rows] / 1e6
            if durations.size <= MIN_STEPS:
                continue
            mean, std = float(durations.mean()), float(durations.std())
            threshold = mean + self.stddev * std
            outliers = durations > threshold
            n = int(outliers.sum())
            p50, p95, p99 = np.quantile(durations, [0.5, 0.95, 0.99])
            self.report["Details"]["step_details"][ModeKeys(mode).name] = {
                "steps": int(durations.size),
                "step_stats": {"mean": mean, "max": float(durations.max()), "p99": float(p99), "p95": float(p95),
                               "p50": float(p50), "min": float(durations.min())},
                "stddev": round(std, 6), "threshold_s": threshold, "number_of_outliers": n,
                "outlier_steps": steps.step[rows][outliers][:MAX_LISTED].tolist(),
                **_stats.histogram(durations[~outliers]),
            }
            if n > self.n_outliers:
                verdict = Verdict.CONDITION_MET
                violations += n
                self.record_violation(end_us - 1, count=0)
            elif verdict is Verdict.NOT_EVALUATED:
                verdict = Verdict.CONDITION_NOT_MET
        if verdict is not Verdict.NOT_EVALUATED:
            self.report["Violations"] = violations
        return verdict
