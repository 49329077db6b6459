"""ProfilerReport's HTML page, read back structurally: rules in the right order with their findings,
hostile names and details escaped, nothing loaded from the network, the right plots for the data
there is (and a note instead of an empty plot for the data there is not)."""
from __future__ import annotations

import re
import shutil
from html import unescape
from pathlib import Path
from typing import Any

import pytest

from sdlocal.evaluator.reports import (
    PROFILER_REPORT_KEY,
    JobSummary,
    ProfilerReportInput,
    RuleReport,
    render_profiler_report,
    write_profiler_report,
)
from sdlocal.trial.profiler import ProfilerReader, Sample, SystemMetricsWriter, TraceWriter
from sdlocal.trial.storage import LocalStorage, S3Storage
from tests.evaluator.reports._html import parse_page
from tests.evaluator.reports._jobs import T0, WrittenJob
from tests.evaluator.reports.conftest import HOSTILE_RULE, rule_reports

NOW = 1_760_003_600.0


def report_of(root: Path, rules: dict[str, Any] | None = None, job_name: str = "train-job") -> tuple[str, ProfilerReportInput]:
    reader = ProfilerReader(root)
    reader.refresh()
    reader.refresh()  # the pass after the end markers
    data = ProfilerReportInput.from_reader(reader, rules or {}, job_name=job_name, clock=lambda: NOW)
    return render_profiler_report(data), data


@pytest.fixture(scope="module")
def cpu_report(cpu_job: WrittenJob) -> tuple[str, ProfilerReportInput]:
    return report_of(cpu_job.root, rule_reports(cpu_job), job_name="pytorch-cpu-bound")


@pytest.fixture(scope="module")
def gpu_report(gpu_job: WrittenJob) -> tuple[str, ProfilerReportInput]:
    return report_of(gpu_job.root, rule_reports(gpu_job), job_name="pytorch-two-gpus")


def test_rules_sorted_by_times_triggered_with_findings_and_advice(cpu_report: tuple[str, Any],
                                                                   cpu_job: WrittenJob) -> None:
    page = parse_page(cpu_report[0])
    rows = page.tables["rules"]
    assert [r[0] for r in rows] == ["CPUBottleneck", "StepOutlier", HOSTILE_RULE, "Dataloader",
                                    "LowGPUUtilization", "MaxInitializationTime", "OverallSystemUsage"]
    assert [r[2] for r in rows] == ["12", "3", "2", "1", "0", "0", "0"]
    assert page.row_classes["rules"] == ["issue"] * 4 + ["ok", "ok", "info"]
    assert [r[1] for r in rows] == ["issues found"] * 4 + ["no issue", "no issue", "summary"]
    by_name = {r[0]: r for r in rows}
    assert by_name["StepOutlier"][3:5] == [str(len(cpu_job.outlier_steps)), f"{cpu_job.train_steps:,}"]
    assert by_name["StepOutlier"][6] == (f"{len(cpu_job.outlier_steps)} step durations were above the mean plus 3 "
                                         "standard deviations.")
    assert by_name["CPUBottleneck"][6] == "The GPU waited on a busy CPU in 900 of 1,100 samples."
    assert by_name["LowGPUUtilization"][6] == "No issue found; it had no data to judge."
    assert "cpu_threshold=90" in by_name["CPUBottleneck"][5]
    # Each rule has its details section with what to do about it; the header names the rules that fired.
    text = page.text
    assert "What to do: Move work off the CPU" in text
    assert "If it fires: Find what the start-up waits for" in text
    assert any(n.startswith("4 of 6 rules found issues: CPUBottleneck, StepOutlier") for n in page.notes)


def test_hostile_rule_names_parameters_and_details_are_text(cpu_report: tuple[str, Any]) -> None:
    html, _ = cpu_report
    page = parse_page(html)
    assert "script" not in page.tags and "img" not in page.tags and "a" in page.tags
    assert HOSTILE_RULE in page.text
    assert "</table><script>alert(3)</script>" in page.text  # the details key, shown as text
    assert "<a href='http://evil.example'>x</a>" in page.text
    assert '"><script>alert(2)</script>' in page.text
    assert "onerror=" not in html.replace("onerror=&quot;", "")
    # every table closed where it opened: the hostile details did not break out of theirs
    assert html.count("<table") == html.count("</table>")


def test_the_page_loads_nothing_from_the_network(cpu_report: tuple[str, Any], gpu_report: tuple[str, Any]) -> None:
    for html, _ in (cpu_report, gpu_report):
        page = parse_page(html)
        for tag, attr, value in page.urls:
            assert value.startswith(("#", "data:")), (tag, attr, value)
        assert not re.search(r"<(script|link|iframe|object|embed)\b", html, re.IGNORECASE)
        assert not re.search(r"url\(\s*['\"]?(https?:)?//", html) and "@import" not in html
        csp = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', html)
        assert csp is not None and unescape(csp.group(1)).startswith("default-src 'none';")
        # ids are unique in the page: several inline SVGs would otherwise share clip paths and markers
        ids = re.findall(r'\bid="([^"]+)"', html)
        assert len(ids) == len(set(ids))


def test_cpu_job_without_gpu_says_so_instead_of_an_empty_plot(cpu_report: tuple[str, Any],
                                                              cpu_job: WrittenJob) -> None:
    html, data = cpu_report
    page = parse_page(html)
    assert page.figure_titles == ["CPU utilization", "CPU utilization per core", "Memory used", "I/O wait",
                                  "Network", "Disk throughput", "Step durations over time",
                                  "Step duration histogram"]
    assert any(n.startswith("No GPU metrics were recorded") for n in page.notes)
    step_rows = [r for r in _tables(html, "stats") if r and r[0] in ("TRAIN", "EVAL")]
    assert [r[:2] for r in step_rows] == [["TRAIN", f"{cpu_job.train_steps:,}"], ["EVAL", f"{cpu_job.eval_steps:,}"]]
    assert step_rows[0][-1] == str(len(cpu_job.outlier_steps))  # every slow step is an outlier, no other
    s = data.summary
    assert (s.cpu_cores, s.gpus, s.nodes) == (4, 0, ("algo-1",))
    assert s.start_us == cpu_job.start_us and s.end_us is not None and s.end_us >= cpu_job.end_us
    assert s.initialization_s == pytest.approx(45.0, abs=0.01)
    assert "Initialization (start to first step)" in page.text and "45 s (7.5 %)" in page.text


def test_gpu_streams_are_plotted_per_gpu(gpu_report: tuple[str, Any]) -> None:
    html, data = gpu_report
    page = parse_page(html)
    assert page.figure_titles[:4] == ["CPU utilization", "CPU utilization per core", "GPU utilization",
                                      "GPU memory utilization"]
    assert not any("No GPU metrics" in n for n in page.notes)
    assert data.summary.gpus == 2
    metrics = [r[0] for r in _tables(html, "stats")]
    assert {"GPU utilization gpu0", "GPU utilization gpu1", "GPU memory gpu0", "GPU memory gpu1"} <= set(metrics)


def _tables(html: str, cls: str) -> list[list[str]]:
    """Body rows of every table of class `cls`."""
    rows: list[list[str]] = []
    for chunk in html.split(f'<table class="{cls}">')[1:]:
        rows += parse_page(f'<table class="{cls}">' + chunk.split("</table>", 1)[0] + "</table>").tables[cls]
    return rows


# ------------------------------------------------------------------------------- little or no data


def _system(root: Path, samples: int, cores: int = 1) -> None:
    w = SystemMetricsWriter(root)
    for i in range(samples):
        w.write([Sample("cpu", f"cpu{c}", "CPUUtilization", 40.0 + c) for c in range(cores)]
                + [Sample("memory", "MemoryUsedPercent", "", 30.0)], T0 + i * 0.5)
    w.write_end_marker()


def _steps(root: Path, n: int) -> None:
    t = TraceWriter(root, "0-algo-1", start_time_us=T0 * 1_000_000)
    for i in range(n):
        start = (T0 + 5 + i) * 1_000_000
        t.record_step("TRAIN", i, start, start + 200_000)
    t.write_end_marker()


@pytest.mark.parametrize("case, figures, notes", [
    ("nothing", [], ["No system metrics were recorded", "No framework trace was recorded",
                     "No framework trace events"]),
    ("one step", ["Step durations over time"], ["No system metrics were recorded"]),
    ("one sample", ["CPU utilization", "Memory used"], ["No GPU metrics", "No framework trace was recorded"]),
    ("system only", ["CPU utilization", "CPU utilization per core", "Memory used"],
     ["No GPU metrics", "No framework trace was recorded"]),
    ("steps only", ["Step durations over time", "Step duration histogram"], ["No system metrics were recorded"]),
])
def test_little_or_no_data_gives_a_clean_page(tmp_path: Path, case: str, figures: list[str], notes: list[str]) -> None:
    {"nothing": lambda: None, "one step": lambda: _steps(tmp_path, 1), "one sample": lambda: _system(tmp_path, 1),
     "system only": lambda: _system(tmp_path, 40, cores=2), "steps only": lambda: _steps(tmp_path, 30)}[case]()
    html, data = report_of(tmp_path)
    page = parse_page(html)
    assert page.figure_titles == figures
    for expected in notes:
        assert any(n.startswith(expected) for n in page.notes), (expected, page.notes)
    assert any(n.startswith("No profiler rule report was given") for n in page.notes)
    assert page.title == "Profiler report: train-job"
    if case == "nothing":
        assert data.summary.start_us is None and "–" in page.text


def test_fixture_profiler_output_from_sagemaker(fixture_profiler: Path, tmp_path: Path) -> None:
    html, data = report_of(fixture_profiler / "test_traces")
    page = parse_page(html)
    assert page.figure_titles[:4] == ["CPU utilization", "CPU utilization per core", "GPU utilization",
                                      "GPU memory utilization"]
    assert data.summary.cpu_cores > 1 and data.summary.gpus >= 1
    assert any(n.startswith("No framework trace was recorded") for n in page.notes)  # an event, but no step

    html, data = report_of(fixture_profiler / "model_timeline_traces")
    page = parse_page(html)
    assert page.figure_titles == []
    assert {"DataIterator", "NcclManager"} <= {r[0] for r in page.tables["stats"]}

    # SageMaker's damaged file: the half-written last line is skipped silently, a bad line inside is
    # counted in the footer.
    job = tmp_path / "damaged"
    folder = job / "system" / "incremental" / "2020060305"
    folder.mkdir(parents=True)
    shutil.copy(fixture_profiler / "1591160699.algo-1.json.corrupt", folder / "1591160699.algo-1.json")
    good = (fixture_profiler / "test_traces/system/incremental").rglob("1591748160.algo-1.json")
    lines = next(good).read_text().splitlines()
    (folder / "1591160760.algo-1.json").write_text("\n".join([lines[0], "{not json", *lines[1:]]) + "\n")
    html, data = report_of(job)
    assert data.damaged_lines == 1
    assert "1 damaged profiler data line(s) were skipped." in parse_page(html).text


def test_rule_report_from_json_is_lenient() -> None:
    r = RuleReport.from_json("X", {"RuleTriggered": "3", "Violations": None, "Datapoints": -4,
                                   "RuleParameters": "a:1\nurl:s3://b/k\n\nnot a pair", "Details": [1, 2]})
    assert (r.triggered, r.violations, r.datapoints) == (3, 0, 0)
    assert r.parameters == {"a": "1", "url": "s3://b/k"} and r.details == {}
    r = RuleReport.from_json("Y", {"RuleParameters": {"b": 2}, "Error": "no GPU data"})
    assert r.parameters == {"b": "2"} and r.error == "no GPU data"
    page = parse_page(render_profiler_report(ProfilerReportInput(
        summary=JobSummary("j"), rules=(r, RuleReport("Z", triggered=1, finding="my own finding")))))
    assert page.tables["rules"][0][0] == "Z" and page.tables["rules"][0][6] == "my own finding"
    assert page.tables["rules"][1][1:2] == ["not evaluated"] and page.row_classes["rules"][1] == "error"
    assert page.tables["rules"][1][6] == "Not evaluated: no GPU data"


def test_written_to_local_and_s3_rule_output(cpu_job: WrittenJob, tmp_path: Path, s3_client: Any,
                                             bucket: str) -> None:
    reader = ProfilerReader(cpu_job.root)
    reader.refresh()
    data = ProfilerReportInput.from_reader(reader, rule_reports(cpu_job), job_name="j", clock=lambda: NOW)
    expected = render_profiler_report(data).encode()
    local = LocalStorage(tmp_path / "rule-output" / "ProfilerReport")
    assert write_profiler_report(local, data) == PROFILER_REPORT_KEY == "profiler-output/profiler-report.html"
    assert local.read(PROFILER_REPORT_KEY) == expected
    s3 = S3Storage(bucket, "job/rule-output/ProfilerReport", client=s3_client)
    write_profiler_report(s3, data)
    body = s3_client.get_object(Bucket=bucket, Key=f"job/rule-output/ProfilerReport/{PROFILER_REPORT_KEY}")["Body"]
    assert body.read() == expected
