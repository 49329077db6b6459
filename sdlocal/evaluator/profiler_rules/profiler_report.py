"""ProfilerReport: every profiler rule on the same data, their reports and the HTML report."""
from __future__ import annotations

import importlib
import inspect
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

from sdlocal.evaluator.contract import JOB_NAME
from sdlocal.evaluator.errors import EvaluatorError, RuleParameterError
from sdlocal.evaluator.profiler_rule import DEFAULT_SCAN_INTERVAL_US, ProfilerRule, combine
from sdlocal.evaluator.profiler_rules.batch_size import BatchSize
from sdlocal.evaluator.profiler_rules.cpu_bottleneck import CPUBottleneck
from sdlocal.evaluator.profiler_rules.dataloader import Dataloader
from sdlocal.evaluator.profiler_rules.gpu_memory_increase import GPUMemoryIncrease
from sdlocal.evaluator.profiler_rules.io_bottleneck import IOBottleneck
from sdlocal.evaluator.profiler_rules.load_balancing import LoadBalancing
from sdlocal.evaluator.profiler_rules.low_gpu_utilization import LowGPUUtilization
from sdlocal.evaluator.profiler_rules.max_initialization_time import MaxInitializationTime
from sdlocal.evaluator.profiler_rules.overall_framework_metrics import OverallFrameworkMetrics
from sdlocal.evaluator.profiler_rules.overall_system_usage import OverallSystemUsage
from sdlocal.evaluator.profiler_rules.step_outlier import StepOutlier
from sdlocal.evaluator.report_files import jsonable
from sdlocal.evaluator.rule import Verdict

log = logging.getLogger(__name__)

# SageMaker's order (its report lists them so before sorting by times triggered).
SUB_RULES: tuple[type[ProfilerRule], ...] = (
    CPUBottleneck, IOBottleneck, LowGPUUtilization, StepOutlier, GPUMemoryIncrease, BatchSize,
    MaxInitializationTime, LoadBalancing, OverallSystemUsage, Dataloader, OverallFrameworkMetrics,
)
# The HTML renderer (evaluator/reports/): `render_profiler_report(ProfilerReportInput) -> str`.
RENDERER_MODULE = "sdlocal.evaluator.reports"
RENDERER_FUNCTION = "render_profiler_report"


class SubRuleFailed(EvaluatorError):
    """A rule ProfilerReport runs failed (names it)."""


def sub_rule_parameters(cls: type[ProfilerRule]) -> list[str]:
    return [n for n in inspect.signature(cls).parameters if n not in ("self", "base_trial", "action_str")]


def split_overrides(overrides: Mapping[str, object]) -> dict[type[ProfilerRule], dict[str, object]]:
    """`<Rule>_<param>` RuleParameters by sub-rule (rule names case-insensitive, as
    smdebug_rulesconfig's ProfilerReport takes them); an unknown rule or parameter is a
    RuleParameterError naming it."""
    by_name = {cls.__name__.lower(): cls for cls in SUB_RULES}
    out: dict[type[ProfilerRule], dict[str, object]] = {}
    for key, value in overrides.items():
        rule_part, sep, param = key.partition("_")
        cls = by_name.get(rule_part.lower())
        if not sep or cls is None:
            names = ", ".join(c.__name__ for c in SUB_RULES)
            raise RuleParameterError("ProfilerReport", key, value,
                                     f"unknown parameter: ProfilerReport takes scan_interval_us and "
                                     f"<Rule>_<parameter> for its rules ({names})")
        known = sub_rule_parameters(cls)
        if param not in known:
            raise RuleParameterError("ProfilerReport", key, value,
                                     f"{cls.__name__} has no parameter {param!r} (it has: {', '.join(known)})")
        out.setdefault(cls, {})[param] = value
    return out


class ProfilerReport(ProfilerRule):
    """Runs every other profiler rule on the same data and writes their reports; fires when any of
    them fired.

    Each rule gets its own parameters as `<Rule>_<parameter>` RuleParameters (CPUBottleneck_threshold=20;
    the rule name is case-insensitive); `scan_interval_us` applies to every rule that does not
    get its own. An unknown rule or parameter is one error line naming it. Each rule is judged as
    if it ran alone (its own windows over the streams it reads); its JSON report is written as
    `profiler-output/profiler-reports/<Rule>.json`, and `profiler-output/profiler-report.html`
    is rendered by `sdlocal.evaluator.reports` from the same reader and reports (left out, with one log
    line, where this version has no renderer). ProfilerReport's own report (not written as a file):
    Details {rule: {"RuleTriggered", "Violations"}}, RuleTriggered = the rules that fired.
    """

    group = "profiler"
    extra_parameters = (("<Rule>_<parameter>", "the rule's default"),)

    def __init__(self, base_trial: Any, scan_interval_us: object = DEFAULT_SCAN_INTERVAL_US,
                 **overrides: object) -> None:
        super().__init__(base_trial, scan_interval_us=scan_interval_us)
        self.overrides = {k: str(v) for k, v in overrides.items()}
        per_rule = split_overrides(overrides)
        self.rules: list[ProfilerRule] = []
        for cls in SUB_RULES:
            params = {"scan_interval_us": scan_interval_us, **per_rule.get(cls, {})}
            try:
                self.rules.append(cls(base_trial, **params))  # type: ignore[arg-type]
            except RuleParameterError as exc:
                key = f"{cls.__name__}_{exc.parameter}"
                raise RuleParameterError("ProfilerReport", key, exc.value, exc.reason) from None
        self.set_rule_parameters(scan_interval_us=self.scan_interval_us, **self.overrides)
        self._running: ProfilerRule | None = None
        self._renderer_missing_logged = False

    @property
    def current_window(self) -> tuple[int, int] | None:  # type: ignore[override]
        return None if self._running is None else self._running.current_window

    @current_window.setter
    def current_window(self, value: tuple[int, int] | None) -> None:
        pass  # the sub-rules' windows are the ones that matter

    def evaluate_windows(self) -> Verdict:
        if self.origin_us is None:
            self.origin_us = self.trial.first_timestamp_us()
        verdict = combine(self._each(lambda rule: rule.evaluate_windows()))
        self._summarize()
        return verdict

    def finish(self) -> Verdict:
        verdict = combine(self._each(lambda rule: rule.finish()))
        self._summarize()
        return verdict

    def _each(self, call: Any) -> list[Verdict]:
        verdicts = []
        for rule in self.rules:
            self._running = rule
            try:
                verdicts.append(call(rule))
            except Exception as exc:  # noqa: BLE001 - named here; the loop turns it into the Error status
                raise SubRuleFailed(f"{rule.rule_name}: {type(exc).__name__}: {exc}") from exc
        self._running = None
        return verdicts

    def _summarize(self) -> None:
        triggers = [r.first_trigger_us for r in self.rules if r.first_trigger_us is not None]
        self.first_trigger_us = min(triggers) if triggers else None
        self.report["RuleTriggered"] = sum(1 for r in self.rules if r.report["RuleTriggered"])
        self.report["Violations"] = sum(int(r.report["Violations"]) for r in self.rules)
        self.report["Datapoints"] = sum(int(r.report["Datapoints"]) for r in self.rules)
        self.report["Details"] = {r.rule_name: {"RuleTriggered": r.report["RuleTriggered"],
                                                "Violations": r.report["Violations"]} for r in self.rules}

    @property
    def first_trigger_interval(self) -> int | None:
        if self.first_trigger_us is None:
            return None
        origin = self.origin_us if self.origin_us is not None else self.first_trigger_us
        return max(0, (self.first_trigger_us - origin) // self.scan_interval_us)

    def report_files(self) -> dict[str, dict[str, Any]]:
        return {rule.rule_name: rule.report for rule in self.rules}

    def html_report_job(self) -> Callable[[], str] | None:
        """profiler-report.html to draw: the renderer's input is built now (from the reader, on the
        evaluator's thread), the returned function draws it (seconds with matplotlib: the report
        sink runs it on a thread of its own while the rule runs). None before any data or where
        there is no renderer.

        The renderer is `sdlocal.evaluator.reports` (its own package): `ProfilerReportInput.from_reader`
        builds its input from this rule's reader and the rules' JSON reports, then
        `render_profiler_report` draws the page. Without that package in this version: no HTML and
        one log line."""
        if self.trial.first_timestamp_us() is None:
            return None
        try:
            reports = importlib.import_module(RENDERER_MODULE)
            build = reports.ProfilerReportInput.from_reader
            render = getattr(reports, RENDERER_FUNCTION)
        except (ImportError, AttributeError):
            if not self._renderer_missing_logged:
                self._renderer_missing_logged = True
                log.info("profiler-report.html is not written: no HTML renderer (%s.%s) in this version",
                         RENDERER_MODULE, RENDERER_FUNCTION)
            return None
        job = os.environ.get(JOB_NAME) or self.trial.name
        data = build(self.trial.reader, {name: jsonable(report) for name, report in self.report_files().items()},
                     job_name=job)
        return lambda: str(render(data))
