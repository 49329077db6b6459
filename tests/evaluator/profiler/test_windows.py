"""The evaluator loop over windows of time: live evaluation while files appear (the injected
`sleep` writes the next files, a fake clock drives deadlines: no timing), end markers of either
output, statuses, report files, errors."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from sdlocal.evaluator.loop import evaluate
from sdlocal.evaluator.profiler_rule import ProfilerRule
from sdlocal.evaluator.profiler_rules import CPUBottleneck, ProfilerReport, StepOutlier
from sdlocal.evaluator.profiler_trial import ProfilerTrial
from sdlocal.evaluator.report_files import ReportSink, report_key
from sdlocal.evaluator.rule import Verdict
from sdlocal.evaluator.status import RuleStatus, Status
from sdlocal.trial.profiler import Sample
from sdlocal.trial.storage import open_storage
from tests.evaluator._trials import Clock
from tests.evaluator.profiler._streams import T0_US, JobWriter, machine


def HEALTHY(i: int) -> list[Sample]:  # noqa: N802 - used like a constant
    return machine(cpu=[40, 40], gpus=[(85, 50)])


def BOTTLENECK(i: int) -> list[Sample]:  # noqa: N802
    return machine(cpu=[97, 5], gpus=[(2, 50)])


def chunks(*actions: Callable[[], object], end: Callable[[], object] | None = None,
           clock: Clock | None = None) -> Callable[[float], None]:
    """A `sleep` that advances the clock and runs the next action (writes files); then `end`."""
    queue = list(actions)

    def sleep(seconds: float) -> None:
        if clock is not None:
            clock.now += seconds
        if queue:
            queue.pop(0)()
        elif end is not None:
            end()

    return sleep


def run(trial: ProfilerTrial, rule: ProfilerRule, sleep: Callable[[float], None], clock: Clock | None = None,
        **kwargs: object) -> tuple[RuleStatus, list[RuleStatus]]:
    statuses: list[RuleStatus] = []
    final = evaluate(trial, rule, interval=1.0, clock=clock or Clock(), sleep=sleep, on_status=statuses.append,
                     **kwargs)  # type: ignore[arg-type]
    return final, statuses


def test_live_verdict_follows_the_data_and_final_after_the_end_markers(tmp_path: Path) -> None:
    job = JobWriter(tmp_path)
    trial = ProfilerTrial.open(tmp_path)
    rule = CPUBottleneck(trial, patience="20", threshold="50")
    seen: list[tuple[int, Status]] = []  # (instants written, status) at each poll
    steps = [lambda: job.system(20, HEALTHY), lambda: job.system(20, HEALTHY), lambda: job.system(40, BOTTLENECK),
             lambda: job.system(40, BOTTLENECK)]
    sleep = chunks(*steps, end=lambda: job.flush().end())

    def on_status(status: RuleStatus) -> None:
        seen.append((job.instant, status.status))

    final = evaluate(trial, rule, interval=1.0, clock=Clock(), sleep=sleep, on_status=on_status)
    assert final.status is Status.ISSUES_FOUND
    # InProgress first; IssuesFound as soon as the bottlenecks outweigh the healthy start (poll
    # after the 3rd chunk: 40 healthy + 40 bottleneck instants = 50 %, not > 50; after the 4th: 67 %)
    assert [s for _, s in seen] == [Status.IN_PROGRESS, Status.ISSUES_FOUND]  # the final one is not a change
    assert seen[1][0] == 120  # fired while training ran, at the poll that read the 4th chunk
    assert "CPUBottleneck at step 0 " in final.status_details  # the scan interval it first fired in
    assert final.last_evaluated_step is None  # SageMaker's profiler statuses have none


def test_silent_data_ends_no_issues_and_the_debug_output_end_marker_also_ends_it(tmp_path: Path) -> None:
    prof, debug = tmp_path / "profiler-output", tmp_path / "debug-output"
    job = JobWriter(prof)
    debug.mkdir()
    trial = ProfilerTrial.open(prof, ended=lambda: (debug / "training_job_end.ts").exists())
    rule = CPUBottleneck(trial, patience="5")
    sleep = chunks(lambda: job.system(20, HEALTHY), lambda: job.system(20, HEALTHY).flush(),
                   end=lambda: (debug / "training_job_end.ts").write_bytes(b""))
    final, statuses = run(trial, rule, sleep)
    assert final.status is Status.NO_ISSUES_FOUND
    assert rule.report["Datapoints"] == 40  # every instant, the last file read by the final pass
    assert not (prof / "system" / "training_job_end.ts").exists()


def test_windows_end_at_the_data_horizon_and_are_at_most_a_scan_interval(tmp_path: Path) -> None:
    job = JobWriter(tmp_path)
    trial = ProfilerTrial.open(tmp_path)

    class Recorder(ProfilerRule):
        streams = frozenset({"system"})

        def __init__(self, base_trial: object) -> None:
            super().__init__(base_trial, scan_interval_us="4000000")
            self.windows_seen: list[tuple[int, int]] = []

        def invoke_at_window(self, start_us: int, end_us: int) -> bool:
            self.windows_seen.append((start_us, end_us))
            return False

    rule = Recorder(trial)
    sleep = chunks(lambda: job.system(5, HEALTHY), lambda: job.system(20, HEALTHY), end=lambda: job.flush().end())
    final, _ = run(trial, rule, sleep)
    assert final.status is Status.NO_ISSUES_FOUND
    w = [(s - T0_US, e - T0_US) for s, e in rule.windows_seen]
    # 5 instants at 0.5 s written (0 .. 2.0 s), files closed per second: the file of 2.0 s is still
    # open, so samples up to 1.5 s are read -> the first window ends at 1.5 s + 1 µs
    assert w[0] == (0, 1_500_001)
    assert all(e - s <= 4_000_000 for s, e in w) and all(a[1] == b[0] for a, b in zip(w, w[1:], strict=False))
    assert w[-1][1] == 12_000_001  # the last sample (instant 24, 12.0 s) + 1 µs


def test_live_and_finished_evaluations_give_the_same_report(tmp_path: Path) -> None:
    """Per-datapoint rules: how the data is cut into windows does not change the report."""
    writes = [HEALTHY] * 3 + [BOTTLENECK] * 5 + [HEALTHY] * 2
    live_dir, done_dir = tmp_path / "live", tmp_path / "done"
    job = JobWriter(live_dir)
    trial = ProfilerTrial.open(live_dir)
    live = CPUBottleneck(trial, patience="10", scan_interval_us="20000000")
    sleep = chunks(*[(lambda fn=fn: job.system(13, fn)) for fn in writes], end=lambda: job.flush().end())
    assert run(trial, live, sleep)[0].status is Status.ISSUES_FOUND
    whole = JobWriter(done_dir)
    for fn in writes:
        whole.system(13, fn)
    whole.flush().end()
    done_trial = ProfilerTrial.open(done_dir)
    done = CPUBottleneck(done_trial, patience="10", scan_interval_us="20000000")
    assert run(done_trial, done, chunks())[0].status is Status.ISSUES_FOUND
    assert live.windows > done.windows > 1
    assert live.report == done.report
    assert live.report["RuleTriggered"] > 1 and live.report["Violations"] > 1


def test_assume_ended_evaluates_a_folder_without_end_markers(tmp_path: Path) -> None:
    job = JobWriter(tmp_path).steps([0.1] * 120 + [1.0] * 11).flush()
    trial = ProfilerTrial.open(tmp_path)
    final, statuses = run(trial, StepOutlier(trial), chunks(), assume_ended=True)
    assert final.status is Status.ISSUES_FOUND and [s.status for s in statuses] == [Status.IN_PROGRESS, Status.ISSUES_FOUND]
    del job


def test_deadline_names_how_far_the_data_was_read(tmp_path: Path) -> None:
    job = JobWriter(tmp_path).system(4, HEALTHY)
    trial = ProfilerTrial.open(tmp_path)
    clock = Clock()
    final, _ = run(trial, CPUBottleneck(trial), chunks(clock=clock), clock=clock, deadline=5.0)
    assert final.status is Status.ERROR
    assert final.status_details == (
        "ClientError: Rule CPUBottleneck did not finish within the deadline of 5 s: training has not ended "
        f"(profiler data read up to {T0_US + 1_500_000} µs)")  # the file of 1.5 s is closed
    del job


def test_no_data_at_all_until_the_end_is_no_issues(tmp_path: Path) -> None:
    trial = ProfilerTrial.open(tmp_path)
    final, _ = run(trial, ProfilerReport(trial), chunks(end=lambda: JobWriter(tmp_path).end()))
    assert final.status is Status.NO_ISSUES_FOUND


def test_a_rule_failing_in_a_window_is_an_error_naming_the_window(tmp_path: Path) -> None:
    JobWriter(tmp_path).system(10, HEALTHY).flush().end()
    trial = ProfilerTrial.open(tmp_path)

    class Broken(ProfilerRule):
        def invoke_at_window(self, start_us: int, end_us: int) -> bool:
            raise ZeroDivisionError("division by zero")

    final, _ = run(trial, Broken(trial), chunks())
    assert final.status is Status.ERROR
    assert final.status_details == (f"ClientError: Rule Broken failed in the window [{T0_US}, {T0_US + 4_500_001}) µs: "
                                    "ZeroDivisionError: division by zero")


def test_a_sub_rule_failing_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    JobWriter(tmp_path).system(10, HEALTHY).flush().end()
    trial = ProfilerTrial.open(tmp_path)
    rule = ProfilerReport(trial)

    def boom(self: object, start_us: int, end_us: int) -> Verdict:
        raise KeyError("gpu9")

    monkeypatch.setattr(CPUBottleneck, "invoke_at_window", boom)
    final, _ = run(trial, rule, chunks())
    assert final.status is Status.ERROR
    assert final.status_details.startswith("ClientError: Rule ProfilerReport failed in the window [")
    assert final.status_details.endswith("SubRuleFailed: CPUBottleneck: KeyError: 'gpu9'")


def test_stop_writes_the_reports_as_they_are(tmp_path: Path) -> None:
    job = JobWriter(tmp_path / "prof")
    out = open_storage(tmp_path / "rule-output")
    trial = ProfilerTrial.open(tmp_path / "prof")
    rule = CPUBottleneck(trial, patience="5")
    requests = iter([False, False, True])
    statuses: list[RuleStatus] = []
    final = evaluate(trial, rule, interval=1.0, clock=Clock(), sleep=chunks(lambda: job.system(20, BOTTLENECK)),
                     on_status=statuses.append, stop_requested=lambda: next(requests),
                     reports=ReportSink(out, min_interval_s=3600))
    assert final.status is Status.STOPPED
    report = json.loads(out.read(report_key("CPUBottleneck")))
    assert report["Datapoints"] == 20 and report["RuleTriggered"] == 1  # the last read, flushed on the way out


def test_reports_are_written_while_running_and_final_at_the_end(tmp_path: Path) -> None:
    job = JobWriter(tmp_path / "prof")
    out = open_storage(tmp_path / "rule-output")
    trial = ProfilerTrial.open(tmp_path / "prof")
    rule = ProfilerReport(trial, CPUBottleneck_patience="5")
    written: list[int] = []

    def sleep(_: float) -> None:
        if out.exists(report_key("CPUBottleneck")):
            written.append(json.loads(out.read(report_key("CPUBottleneck")))["Datapoints"])
        if job.instant < 60:
            job.system(20, BOTTLENECK)
        else:
            job.flush().end()

    final = evaluate(trial, rule, interval=1.0, clock=Clock(), sleep=sleep, reports=ReportSink(out, min_interval_s=0))
    assert final.status is Status.ISSUES_FOUND
    assert written[0] == 0 and written[1:4] == [20, 40, 60]  # while running, as data came
    names = sorted(k.rsplit("/", 1)[-1] for k in out.list("profiler-output/profiler-reports/"))
    assert names == sorted(f"{r.rule_name}.json" for r in rule.rules) and len(names) == 11
    final_report = json.loads(out.read(report_key("CPUBottleneck")))
    assert final_report["Datapoints"] == 60
    assert set(final_report) == {"RuleTriggered", "Violations", "Details", "Datapoints", "RuleParameters"}



def test_max_initialization_time_live_waits_for_the_framework_data(tmp_path: Path) -> None:
    """Live, a first step whose trace file is not uploaded yet is not a slow start: the rule's
    windows stop where the framework data read stops, however far the system data goes."""
    from sdlocal.evaluator.profiler_rules import MaxInitializationTime
    from sdlocal.trial.profiler.names import DATALOADER_INITIALIZE

    job = JobWriter(tmp_path)
    trial = ProfilerTrial.open(tmp_path)
    rule = MaxInitializationTime(trial, threshold="0.25")  # 15 s
    job.event(DATALOADER_INITIALIZE, "_SingleProcessDataLoaderIter.__init__", 0.5).flush()  # a first trace file

    def late_steps() -> None:
        job.skip(2.5).steps([0.1] * 10)  # the first step started at 3 s

    sleep = chunks(lambda: job.system(60, HEALTHY), lambda: job.system(60, HEALTHY), late_steps,
                   end=lambda: job.flush().end())
    final, statuses = run(trial, rule, sleep)
    assert final.status is Status.NO_ISSUES_FOUND
    assert rule.report["Details"]["initialization_s"] == 3.0


def test_max_initialization_time_live_fires_on_a_slow_start(tmp_path: Path) -> None:
    from sdlocal.evaluator.profiler_rules import MaxInitializationTime

    job = JobWriter(tmp_path)
    trial = ProfilerTrial.open(tmp_path)
    rule = MaxInitializationTime(trial, threshold="0.25")
    seen: list[tuple[int, Status]] = []
    sleep = chunks(lambda: job.system(60, HEALTHY), lambda: job.skip(40).steps([0.1] * 10),
                   lambda: job.system(20, HEALTHY), end=lambda: job.flush().end())
    final = evaluate(trial, rule, interval=1.0, clock=Clock(), sleep=sleep,
                     on_status=lambda st: seen.append((len(job.trace_writer.closed_files), st.status)))
    assert final.status is Status.ISSUES_FOUND
    assert seen == [(0, Status.IN_PROGRESS), (1, Status.ISSUES_FOUND)]  # as soon as the first step was read
