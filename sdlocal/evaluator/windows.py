"""The evaluator loop's source for profiler rules: windows of time of a job's profiler-output.

On every poll: look for the end markers (profiler-output's `system/` and
`framework/training_job_end.ts`, or the debug-output's), read the files that appeared
(`ProfilerTrial.refresh`), then let the rule judge every window the data now allows
(`ProfilerRule.evaluate_windows`: consecutive `[start, end)` windows, at most `scan_interval_us`
long, ending at the data horizon while training runs). Once training has ended and the reader
made its last pass over the files (`loaded_all`), the last window reaches the end of the data,
the rule's `invoke_at_end` runs and the evaluation ends.

A verdict follows the data by at most one polling interval plus one refresh, whatever the
scan interval: a window never waits to be full.
"""
from __future__ import annotations

from typing import Any

from sdlocal.evaluator.profiler_rule import ProfilerRule
from sdlocal.evaluator.profiler_trial import ProfilerTrial
from sdlocal.evaluator.report_files import ReportSink


class WindowSource:
    def __init__(self, trial: ProfilerTrial, rule: ProfilerRule, *, assume_ended: bool = False,
                 reports: ReportSink | None = None) -> None:
        self.trial = trial
        self.rule = rule
        self.assume_ended = assume_ended
        self.reports = reports

    def open(self) -> str | None:
        if self.assume_ended:
            self.trial.assume_ended()
        return None

    def poll(self, fire: Any) -> bool:
        self.trial.training_ended()  # an end marker: this refresh is the reader's last pass
        self.trial.refresh()
        fire(self.rule.evaluate_windows(), self.rule.first_trigger_interval)
        if self.reports is not None:
            self.reports.publish(self.rule)
        return self.trial.loaded_all

    def finish(self, fire: Any) -> None:
        fire(self.rule.finish(), self.rule.first_trigger_interval)

    def where(self) -> str:
        window = getattr(self.rule, "current_window", None)
        if window is None:
            return ""
        return f" in the window [{window[0]}, {window[1]}) µs"

    def progress(self) -> dict[str, Any]:
        return {}

    def not_ended(self) -> str:
        last = self.trial.last_timestamp_us()
        seen = "no profiler data read" if last is None else f"profiler data read up to {last} µs"
        return f"training has not ended ({seen})"

    def close(self) -> None:
        if self.reports is not None:
            self.reports.publish(self.rule, final=True)
