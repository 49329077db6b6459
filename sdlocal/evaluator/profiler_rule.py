"""ProfilerRule: the base class of profiler rules, built-in and custom.

A profiler rule judges windows of time of the job's profiler data instead of tensor steps:

    from sdlocal.evaluator import ProfilerRule

    class SlowSteps(ProfilerRule):
        streams = frozenset({"framework"})          # what it reads: "system", "framework" (default both)

        def __init__(self, base_trial, threshold_ms="500", scan_interval_us="60000000"):
            super().__init__(base_trial, scan_interval_us=scan_interval_us)
            self.threshold_us = float(threshold_ms) * 1000

        def invoke_at_window(self, start_us, end_us):
            steps = self.base_trial.framework.steps(mode="TRAIN", start_us=start_us, end_us=end_us)
            return bool((steps.duration_us > self.threshold_us).any())

`base_trial` is an `sdlocal.evaluator.profiler_trial.ProfilerTrial` (`.system`, `.framework`: the
`sdlocal.trial.profiler` reader's data, queried by window; `get_system_metrics`/`get_framework_metrics`
as smdebug's ProfilerTrial). Windows are consecutive, half-open `[start_us, end_us)` in epoch µs,
each judged once, in order: they start at the first timestamp of the rule's streams, are at most
`scan_interval_us` long, and while training runs they end at the data horizon (the newest time
up to which every file of those streams has been read), so a verdict never waits for a window
to fill: it follows the data within one poll of the evaluator. A stretch of time without data
longer than a window is jumped over (windows may be empty, but not thousands of them in a row).
`invoke_at_window` answers True /
a `Verdict` (or raises smdebug's RuleEvaluationConditionMet); `invoke_at_end()`, if defined, runs
once after the last window, when training has ended.

Counting in `self.report` (SageMaker's `{"RuleTriggered", "Violations", "Details", "Datapoints",
"RuleParameters"}`): built-in rules call `record_violation(timestamp_us)` for each datapoint at
which their condition holds; RuleTriggered counts the scan intervals of data time (from the
rule's first timestamp, `scan_interval_us` long) in which that happened, Violations the
datapoints. A window judged "met" without such a call (a custom rule returning True) records one
violation at the window's end. Datapoints and Details are the rule's own.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from sdlocal.evaluator.params import parse_int
from sdlocal.evaluator.profiler_trial import STREAMS, ProfilerTrial
from sdlocal.evaluator.rule import Rule, RuleKind, Verdict

# SageMaker's default scan interval (smdebug_rulesconfig's `scan_interval_us`): the longest window.
DEFAULT_SCAN_INTERVAL_US = 60_000_000


def combine(verdicts: Iterable[Verdict]) -> Verdict:
    """Met if any is met; not met if any was judged; else not evaluated."""
    out = Verdict.NOT_EVALUATED
    for v in verdicts:
        if v is Verdict.CONDITION_MET:
            return v
        if v is Verdict.CONDITION_NOT_MET:
            out = v
    return out


class ProfilerRule(Rule):
    kind: ClassVar[RuleKind] = RuleKind.PROFILER
    streams: ClassVar[frozenset[str]] = STREAMS

    def __init__(self, base_trial: Any, scan_interval_us: object = DEFAULT_SCAN_INTERVAL_US,
                 action_str: str = "") -> None:
        super().__init__(base_trial, action_str=action_str)
        self.scan_interval_us = int(parse_int(self.rule_name, "scan_interval_us", scan_interval_us, minimum=1))  # type: ignore[arg-type]
        self.origin_us: int | None = None  # the first timestamp of the rule's streams: where windows start
        self.cursor_us: int | None = None  # where the next window starts
        self.first_trigger_us: int | None = None  # the datapoint at which the rule first fired
        self._last_interval: int | None = None
        self._recorded_in_window = False
        self._window_end = 0
        self.current_window: tuple[int, int] | None = None  # the window being judged
        self.windows = 0  # windows judged

    # ---- what a rule implements ---------------------------------------------------------------
    def invoke_at_window(self, start_us: int, end_us: int) -> bool | Verdict:
        """True (or Verdict.CONDITION_MET) when the condition is met in [start_us, end_us)."""
        raise NotImplementedError(f"{self.rule_name} must implement invoke_at_window(start_us, end_us)")

    def invoke_at_step(self, step: int) -> bool | Verdict:
        raise TypeError(f"{self.rule_name} is a profiler rule: it judges windows of time, not steps")

    # ---- helpers for rules --------------------------------------------------------------------
    @property
    def trial(self) -> ProfilerTrial:
        return self.base_trial  # type: ignore[no-any-return]

    def set_rule_parameters(self, **params: object) -> None:
        """RuleParameters as SageMaker's rules write them: `name:value` lines."""
        self.report["RuleParameters"] = "\n".join(f"{k}:{v}" for k, v in params.items())

    def interval_of(self, timestamp_us: int) -> int:
        """The scan interval (0, 1, ...) of data time a timestamp falls in."""
        origin = self.origin_us if self.origin_us is not None else timestamp_us
        return max(0, (timestamp_us - origin) // self.scan_interval_us)

    def record_violation(self, timestamp_us: int, count: int = 1) -> None:
        """The condition holds at the datapoint `timestamp_us` (`count` violations there)."""
        self._recorded_in_window = True
        self.report["Violations"] += count  # 0: the rule keeps its own Violations figure
        interval = self.interval_of(timestamp_us)
        if interval != self._last_interval:
            self._last_interval = interval
            self.report["RuleTriggered"] += 1
        if self.first_trigger_us is None or timestamp_us < self.first_trigger_us:
            self.first_trigger_us = timestamp_us

    def record_violations(self, timestamps_us: Iterable[int]) -> None:
        """`record_violation` for each datapoint, in time order."""
        for ts in timestamps_us:
            self.record_violation(int(ts))

    @property
    def first_trigger_interval(self) -> int | None:
        """The scan interval the rule first fired in (what its status calls the step)."""
        return None if self.first_trigger_us is None else self.interval_of(self.first_trigger_us)

    # ---- what the evaluator loop calls --------------------------------------------------------
    def evaluate_windows(self) -> Verdict:
        """Judge every window the data allows now (module docstring); met if any window was."""
        trial = self.trial
        horizon = trial.horizon_us(self.streams)
        if horizon is None:
            return Verdict.NOT_EVALUATED
        if self.cursor_us is None:
            first = trial.first_timestamp_us(self.streams)
            if first is None:
                return Verdict.NOT_EVALUATED
            self.origin_us = self.cursor_us = first
        verdicts = []
        while self.cursor_us < horizon:
            start = self.cursor_us
            end = min(start + self.scan_interval_us, horizon)
            verdicts.append(self.judge_window(start, end))
            self.cursor_us = end
            if end < horizon:
                # A stretch without data longer than a window is jumped over, to the window
                # (on the origin's grid) holding the next datapoint.
                following = trial.next_timestamp_us(self.streams, end)
                if following is None or following >= horizon:
                    self.cursor_us = horizon
                elif following >= end + self.scan_interval_us:
                    assert self.origin_us is not None
                    skipped = (following - self.origin_us) // self.scan_interval_us
                    self.cursor_us = self.origin_us + skipped * self.scan_interval_us
        return combine(verdicts)

    def judge_window(self, start_us: int, end_us: int) -> Verdict:
        self._recorded_in_window = False
        self._window_end = end_us
        self.current_window = (start_us, end_us)
        self.windows += 1
        verdict = self.judge(self.invoke_at_window, start_us, end_us)
        self.current_window = None
        return verdict

    def finish(self) -> Verdict:
        """After the last window: the rule's `invoke_at_end()`, if it has one."""
        end_check = getattr(self, "invoke_at_end", None)
        if end_check is None:
            return Verdict.NOT_EVALUATED
        self._recorded_in_window = False
        self._window_end = self.cursor_us if self.cursor_us is not None else 0
        return self.judge(end_check)

    def report_files(self) -> dict[str, dict[str, Any]]:
        """The JSON reports this rule writes, by name (`<name>.json` in profiler-reports/)."""
        return {self.rule_name: self.report}

    def _count(self, verdict: Verdict) -> Verdict:
        # A window judged met without a datapoint recorded (a custom rule's True): one violation
        # at the window's last instant. Datapoints are the rule's own count, not windows.
        if verdict.fired and not self._recorded_in_window:
            self.record_violation(max(0, self._window_end - 1))
        return verdict
