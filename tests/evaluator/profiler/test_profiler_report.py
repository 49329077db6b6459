"""ProfilerReport: every profiler rule on the same data with <Rule>_<param> overrides, their JSON
reports, the renderer's input (ReportData) and the HTML hook point."""
from __future__ import annotations

import json
import logging
import sys
import threading
import types
from pathlib import Path

import numpy as np
import pytest

from sdlocal.evaluator.errors import RuleParameterError
from sdlocal.evaluator.loop import evaluate
from sdlocal.evaluator.profiler_rules import CPUBottleneck, ProfilerReport, StepOutlier
from sdlocal.evaluator.profiler_rules.profiler_report import SUB_RULES
from sdlocal.evaluator.profiler_trial import ProfilerTrial
from sdlocal.evaluator.registry import instantiate_rule
from sdlocal.evaluator.report_files import HTML_REPORT_KEY, REPORTS_PREFIX, ReportSink
from sdlocal.evaluator.rule import Verdict
from sdlocal.evaluator.status import Status
from sdlocal.trial.storage import open_storage
from tests.evaluator._trials import Clock
from tests.evaluator.profiler._streams import JobWriter, finished_trial, judge_all, machine

ALL_OTHERS = {"BatchSize", "CPUBottleneck", "Dataloader", "GPUMemoryIncrease", "IOBottleneck", "LoadBalancing",
              "LowGPUUtilization", "MaxInitializationTime", "OverallSystemUsage", "OverallFrameworkMetrics",
              "StepOutlier"}


def healthy_job(root: Path, *, slow_steps: int = 0) -> Path:
    rng = np.random.default_rng(0)
    job = JobWriter(root).system(240, lambda i: machine(cpu=[60, 50], gpus=[(90 + rng.uniform(-3, 3), 60)]))
    durations = list(np.clip(rng.normal(0.1, 0.005, 150), 0.05, None))
    for i in range(slow_steps):
        durations[10 + i * 12] = 2.0
    job.steps(durations).flush().end()
    return root


def test_runs_every_other_profiler_rule() -> None:
    assert {c.__name__ for c in SUB_RULES} == ALL_OTHERS


def test_no_issues_on_a_healthy_job_and_issues_when_one_rule_fires(tmp_path: Path) -> None:
    rule = ProfilerReport(finished_trial(healthy_job(tmp_path / "ok")))
    assert judge_all(rule) is Verdict.CONDITION_NOT_MET
    assert rule.report["RuleTriggered"] == 0
    slow = ProfilerReport(finished_trial(healthy_job(tmp_path / "slow", slow_steps=11)))
    assert judge_all(slow) is Verdict.CONDITION_MET
    assert slow.report["RuleTriggered"] == 1 and slow.report["Details"]["StepOutlier"]["RuleTriggered"] == 1
    assert [r.rule_name for r in slow.rules if r.report["RuleTriggered"]] == ["StepOutlier"]


def test_overrides_reach_their_rule_only(tmp_path: Path) -> None:
    trial = finished_trial(healthy_job(tmp_path, slow_steps=11))
    rule = ProfilerReport(trial, StepOutlier_n_outliers="20", cpubottleneck_threshold="5", scan_interval_us="30000000")
    by_name = {r.rule_name: r for r in rule.rules}
    assert isinstance(by_name["StepOutlier"], StepOutlier) and by_name["StepOutlier"].n_outliers == 20
    assert isinstance(by_name["CPUBottleneck"], CPUBottleneck) and by_name["CPUBottleneck"].threshold == 5.0
    assert by_name["IOBottleneck"].threshold == 50.0  # not CPUBottleneck's
    assert {r.scan_interval_us for r in rule.rules} == {30_000_000}
    assert judge_all(rule) is Verdict.CONDITION_NOT_MET  # 11 outliers are not more than 20
    assert rule.report["RuleParameters"] == (
        "scan_interval_us:30000000\nStepOutlier_n_outliers:20\ncpubottleneck_threshold:5")


@pytest.mark.parametrize("key,value,message", [
    ("CPUBotleneck_threshold", "20",
     "Rule ProfilerReport: invalid value '20' for parameter 'CPUBotleneck_threshold': unknown parameter: "
     "ProfilerReport takes scan_interval_us and <Rule>_<parameter> for its rules (CPUBottleneck, IOBottleneck, "
     "LowGPUUtilization, StepOutlier, GPUMemoryIncrease, BatchSize, MaxInitializationTime, LoadBalancing, "
     "OverallSystemUsage, Dataloader, OverallFrameworkMetrics)"),
    ("CPUBottleneck_treshold", "20",
     "Rule ProfilerReport: invalid value '20' for parameter 'CPUBottleneck_treshold': CPUBottleneck has no "
     "parameter 'treshold' (it has: threshold, gpu_threshold, cpu_threshold, patience, scan_interval_us)"),
    ("StepOutlier_stddev", "abc",
     "Rule ProfilerReport: invalid value 'abc' for parameter 'StepOutlier_stddev': expected a number"),
    ("LowGPUUtilization_threshold_p95", "170",
     "Rule ProfilerReport: invalid value '170' for parameter 'LowGPUUtilization_threshold_p95': must be <= 100"),
    ("threshold", "3", None),
])
def test_bad_overrides_are_one_line_naming_them(tmp_path: Path, key: str, value: str, message: str | None) -> None:
    trial = ProfilerTrial.open(tmp_path)
    with pytest.raises(RuleParameterError) as info:
        instantiate_rule(ProfilerReport, trial, {key: value})
    assert "\n" not in str(info.value) and info.value.parameter == key
    if message is not None:
        assert str(info.value) == message


def test_writes_each_rules_report_and_hands_the_renderer_the_reader_and_reports(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The renderer (evaluator.reports, its own package) gets the rule's reader and the eleven JSON
    reports through `ProfilerReportInput.from_reader`, and its page lands beside profiler-reports/."""
    calls: list[tuple[object, dict, str]] = []

    class FakeInput:
        @classmethod
        def from_reader(cls, reader: object, rule_reports: dict, *, job_name: str) -> str:
            calls.append((reader, rule_reports, job_name))
            return f"{len(rule_reports)} rules"

    renderer = types.ModuleType("sdlocal.evaluator.reports")
    renderer.ProfilerReportInput = FakeInput  # type: ignore[attr-defined]
    renderer.render_profiler_report = lambda data: f"<html>{data}</html>"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sdlocal.evaluator.reports", renderer)
    monkeypatch.setenv("SDLOCAL_JOB_NAME", "my-job")
    trial = ProfilerTrial.open(healthy_job(tmp_path / "prof", slow_steps=11))
    out = tmp_path / "rule-output"
    final = evaluate(trial, ProfilerReport(trial), interval=1.0, clock=Clock(), sleep=lambda s: None,
                     reports=ReportSink(open_storage(out)))
    assert final.status is Status.ISSUES_FOUND
    folder = out / REPORTS_PREFIX
    assert sorted(p.name for p in folder.iterdir()) == sorted(f"{n}.json" for n in ALL_OTHERS)
    assert (out / HTML_REPORT_KEY).read_text() == "<html>11 rules</html>"
    reader, reports, job = calls[-1]
    assert reader is trial.reader and job == "my-job"
    assert reports == {n: json.loads((folder / f"{n}.json").read_text()) for n in ALL_OTHERS}
    assert reports["StepOutlier"]["RuleTriggered"] == 1
    assert reports["StepOutlier"]["Details"]["step_details"]["TRAIN"]["number_of_outliers"] == 11


def test_without_a_renderer_no_html_and_one_log_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setitem(sys.modules, "sdlocal.evaluator.reports", None)  # importing it raises ImportError
    trial = finished_trial(healthy_job(tmp_path))
    rule = ProfilerReport(trial)
    judge_all(rule)
    with caplog.at_level(logging.INFO, logger="sdlocal.evaluator.profiler_rules.profiler_report"):
        assert rule.html_report_job() is None and rule.html_report_job() is None
    # (records of this module only: a server thread left by an earlier test may log meanwhile)
    assert [r.getMessage() for r in caplog.records if r.name == "sdlocal.evaluator.profiler_rules.profiler_report"] == [
        "profiler-report.html is not written: no HTML renderer (sdlocal.evaluator.reports.render_profiler_report) in this version"]


def fake_renderer(monkeypatch: pytest.MonkeyPatch, render) -> None:  # type: ignore[no-untyped-def]
    class FakeInput:
        @classmethod
        def from_reader(cls, reader: object, rule_reports: dict, *, job_name: str) -> int:
            return len(reader.system)  # type: ignore[attr-defined]

    module = types.ModuleType("sdlocal.evaluator.reports")
    module.ProfilerReportInput = FakeInput  # type: ignore[attr-defined]
    module.render_profiler_report = render  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sdlocal.evaluator.reports", module)


def test_live_drawing_runs_beside_the_polls_and_the_final_one_waits_for_it(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    drawn: list[int] = []

    def render(samples: int) -> str:
        if not drawn:
            assert release.wait(30)  # the first (live) drawing blocks until the test lets it go
        drawn.append(samples)
        return f"<html>{samples}</html>"

    fake_renderer(monkeypatch, render)
    job = JobWriter(tmp_path / "prof")
    trial = ProfilerTrial.open(tmp_path / "prof")
    out = open_storage(tmp_path / "out")
    polls: list[int] = []

    def sleep(_: float) -> None:
        polls.append(job.instant)
        if job.instant < 60:
            job.system(20, lambda i: machine(cpu=[30, 30]))  # polls go on while the drawing blocks
        else:
            release.set()
            job.flush().end()

    final = evaluate(trial, ProfilerReport(trial), interval=1.0, clock=Clock(), sleep=sleep,
                     reports=ReportSink(out, html_interval_s=3600))
    assert final.status is Status.NO_ISSUES_FOUND
    assert polls == [0, 20, 40, 60]  # all while the first drawing was blocked
    per_instant = 5  # memory, 2 x (CPUUtilization, I/OWaitPercentage)
    # the live drawing (released at the end) finished before the final one was drawn
    assert drawn == [20 * per_instant, 60 * per_instant]
    assert out.read(HTML_REPORT_KEY) == f"<html>{60 * per_instant}</html>".encode()


def test_a_failing_drawing_is_logged_and_the_verdict_stands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    def render(samples: int) -> str:
        raise ValueError("no fonts")

    fake_renderer(monkeypatch, render)
    trial = ProfilerTrial.open(healthy_job(tmp_path / "prof", slow_steps=11))
    out = open_storage(tmp_path / "out")
    with caplog.at_level(logging.ERROR, logger="sdlocal.evaluator.report_files"):
        final = evaluate(trial, ProfilerReport(trial), interval=1.0, clock=Clock(), sleep=lambda s: None,
                         reports=ReportSink(out))
    assert final.status is Status.ISSUES_FOUND
    assert not out.exists(HTML_REPORT_KEY) and out.exists("profiler-output/profiler-reports/StepOutlier.json")
    assert {r.getMessage() for r in caplog.records if r.name.startswith("sdlocal.evaluator.")} == {
        "profiler-report.html could not be written: ValueError: no fonts"}
