"""End to end, the profiler side (issue 10, "Done when"): `sdlocal run` (a subprocess, process
runtime) with the real hook, sampler and evaluators against a real moto server.

(a) a job as the SageMaker Python SDK v2 builds it: its default ProfilerConfig (500 ms, the
    FrameworkProfile defaults in ProfilingParameters) and ProfilerReport beside a Debugger rule:
    system files in profiler-output/, ProfilerReport's status after the Debugger rule's in `run`
    and `summary --json`, its eleven JSON reports and profiler-report.html in S3; the page rendered
    in headless Chromium with its plots and rules table drawn.
(b) examples/profiler-job.yaml, every profiler rule attached: a final status and a report each."""
from __future__ import annotations

import importlib.util
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.chromium import RenderedPage, render_page
from tests.helpers import s3_keys
from tests.launcher.e2e.test_e2e import REPO, job_pids, sdlocal

pytestmark = pytest.mark.slow

PROFILER_RULES = ("BatchSize", "CPUBottleneck", "Dataloader", "GPUMemoryIncrease", "IOBottleneck", "LoadBalancing",
                  "LowGPUUtilization", "MaxInitializationTime", "OverallFrameworkMetrics", "OverallSystemUsage",
                  "StepOutlier")
REPORT_KEYS = {"RuleTriggered", "Violations", "Details", "Datapoints", "RuleParameters"}
# sagemaker 2.x: ProfilerConfig(framework_profile_params=FrameworkProfile()) as _to_request_dict() sends it
SDK_PROFILING_PARAMETERS = {
    "LocalPath": "/opt/ml/output/profiler",
    "RotateMaxFileSizeInBytes": "10485760",
    "RotateFileCloseIntervalInSeconds": "60",
    "FileOpenFailThreshold": "50",
    "DetailedProfilingConfig": '{"StartStep": 5, "NumSteps": 1}',
    "DataloaderProfilingConfig": '{"StartStep": 7, "NumSteps": 1, "MetricsRegex": ".*"}',
    "PythonProfilingConfig": '{"StartStep": 9, "NumSteps": 3, "ProfilerName": "cprofile", "cProfileTimer": "total_time"}',
    "HorovodProfilingConfig": '{"StartStep": 13, "NumSteps": 1}',
    "SMDataParallelProfilingConfig": '{"StartStep": 15, "NumSteps": 1}',
}
RULES_IMAGE = "503895931360.dkr.ecr.us-east-1.amazonaws.com/sagemaker-debugger-rules:latest"
FINAL_OK = {"IssuesFound", "NoIssuesFound"}  # a verdict: not Error, not Stopped


def sdk_request(report_name: str) -> dict[str, Any]:
    return {
        "EntryPoint": "train.py", "SourceDir": str(REPO / "examples"),
        # a 5-s pause keeps the job alive for several samples and polls on a fast machine
        "HyperParameters": {"steps": "300", "stall-at-step": "30", "stall-seconds": "5"},
        "DebugHookConfig": {"S3OutputPath": "s3://sdlocal/jobs", "CollectionConfigurations": [
            {"CollectionName": "losses", "CollectionParameters": {"save_interval": "5"}}]},
        "DebugRuleConfigurations": [{"RuleConfigurationName": "LossNotDecreasing", "RuleEvaluatorImage": RULES_IMAGE,
                                     "RuleParameters": {"rule_to_invoke": "LossNotDecreasing"}}],
        "ProfilerConfig": {"S3OutputPath": "s3://sdlocal/jobs", "ProfilingIntervalInMilliseconds": 500,
                           "ProfilingParameters": SDK_PROFILING_PARAMETERS},
        "ProfilerRuleConfigurations": [{"RuleConfigurationName": report_name, "RuleEvaluatorImage": RULES_IMAGE,
                                        "RuleParameters": {"rule_to_invoke": "ProfilerReport"}}],
    }


def keys(s3_client: Any, prefix: str) -> list[str]:
    return s3_keys(s3_client, "sdlocal", prefix, relative=True)


def read_json(s3_client: Any, key: str) -> Any:
    return json.loads(s3_client.get_object(Bucket="sdlocal", Key=key)["Body"].read())


def hook_writes_a_timeline() -> bool:
    """The framework timeline (issue 10, part 2) comes with the hook's hook/_timeline.py."""
    return importlib.util.find_spec("sdlocal.hook._timeline") is not None


def run_job(args: list[str], tmp_path: Path, moto_server: str) -> tuple[list[dict[str, Any]], str]:
    proc = sdlocal(args, tmp_path, moto_server)
    try:
        out, err = proc.communicate(timeout=540)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "Training completed" in err and "not evaluated yet" not in err
    return json.loads(out), err


def check_reports(s3_client: Any, rule_output: str, rules: tuple[str, ...]) -> None:
    reports = sorted(keys(s3_client, f"{rule_output}/profiler-output/profiler-reports/"))
    assert reports == sorted(f"{r}.json" for r in rules)
    for name in rules:
        report = read_json(s3_client, f"{rule_output}/profiler-output/profiler-reports/{name}.json")
        assert REPORT_KEYS <= set(report), (name, sorted(report))


def test_sdk_job_with_profiler_report(tmp_path: Path, moto_server: str, s3_client: Any) -> None:
    job, report_name = f"e2e-sdkprof-{uuid.uuid4().hex[:6]}", "ProfilerReport-1700000000"
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps(sdk_request(report_name)))
    statuses, err = run_job(["run", str(spec), "--job-name", job], tmp_path, moto_server)
    assert "System metrics of this host every 500 ms" in err
    # profiler rules after the Debugger rules, as rule_job_summary() lists them
    assert [s["RuleConfigurationName"] for s in statuses] == ["LossNotDecreasing", report_name]
    assert {s["RuleEvaluationStatus"] for s in statuses} <= FINAL_OK, statuses

    profiler = keys(s3_client, f"jobs/{job}/profiler-output/")
    system = [k for k in profiler if k.startswith("system/incremental/")]
    assert len(system) >= 3 and all(k.endswith(".algo-1.json") for k in system)
    assert {"system/training_job_end.ts", "framework/training_job_end.ts"} <= set(profiler)
    first = s3_client.get_object(Bucket="sdlocal", Key=f"jobs/{job}/profiler-output/{sorted(system)[0]}")
    sample = json.loads(first["Body"].read().splitlines()[0])
    assert set(sample) == {"Type", "Name", "Dimension", "Value", "Timestamp", "NodeId"} and sample["NodeId"] == "algo-1"
    if hook_writes_a_timeline():
        assert [k for k in profiler if k.startswith("framework/pevents/")], profiler

    rule_output = f"jobs/{job}/rule-output/{report_name}"
    check_reports(s3_client, rule_output, PROFILER_RULES)
    assert read_json(s3_client, f"{rule_output}/status.json")["RuleEvaluationStatus"] == statuses[1]["RuleEvaluationStatus"]
    page = s3_client.get_object(Bucket="sdlocal", Key=f"{rule_output}/profiler-output/profiler-report.html")
    html_file = tmp_path / "profiler-report.html"
    html_file.write_bytes(page["Body"].read())
    assert job in html_file.read_text(encoding="utf-8")
    check_page(render_page(html_file, tmp_path, ["figure.plot svg", "table.rules tbody tr", "div.cards .card"]))

    summary = sdlocal(["summary", job], tmp_path, moto_server)
    out, err = summary.communicate(timeout=60)
    assert summary.returncode == 0, err
    # summary --json is rule_job_summary()'s shape (no LastEvaluatedStep): the same rules and verdicts
    assert verdicts_of(json.loads(out)) == verdicts_of(statuses)
    assert not job_pids(job)


def check_page(page: RenderedPage) -> None:
    """The page as a person sees it: CPU plots drawn in colour, each rule a row with its text."""
    titles = [t.split("\n")[0] for t in page.texts["figure.plot svg"]]
    plots = page.boxes["figure.plot svg"]
    assert any("CPU utilization" in t for t in page.texts["figure.plot svg"]), titles
    for box, text in zip(plots, page.texts["figure.plot svg"], strict=True):
        assert box.width > 900 and box.height > 150, (text[:40], box)
        assert page.ink(box) > 0.01, text[:40]  # axes, labels and data (a flat line plot: ~2 %): not blank
    assert max(page.saturated_share(b) for b in plots) > 0.004  # the data, drawn in colour
    rows = page.texts["table.rules tbody tr"]
    assert sorted(r.split("\t")[0].strip() for r in rows) == sorted(PROFILER_RULES)
    for box in page.boxes["table.rules tbody tr"]:
        assert page.ink(box) > 0.03
    assert page.boxes["div.cards .card"]


def test_every_profiler_rule(tmp_path: Path, moto_server: str, s3_client: Any) -> None:
    job = f"e2e-allprof-{uuid.uuid4().hex[:6]}"
    statuses, _ = run_job(["run", "examples/profiler-job.yaml", "--job-name", job], tmp_path, moto_server)
    names = ["LossNotDecreasing", "ProfilerReport", *PROFILER_RULES]
    assert [s["RuleConfigurationName"] for s in statuses] == names
    assert {s["RuleEvaluationStatus"] for s in statuses} <= FINAL_OK, statuses
    for name in names[1:]:
        rule_output = f"jobs/{job}/rule-output/{name}"
        check_reports(s3_client, rule_output, PROFILER_RULES if name == "ProfilerReport" else (name,))
        status = read_json(s3_client, f"{rule_output}/status.json")
        assert status["RuleConfigurationName"] == name and status["RuleEvaluationStatus"] in FINAL_OK
    assert keys(s3_client, f"jobs/{job}/rule-output/ProfilerReport/profiler-output/profiler-report.html")
    assert not job_pids(job)


def verdicts_of(rows: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """What `run --json` and `summary --json` (rule_job_summary()'s shape) both say of each rule."""
    return [(r["RuleConfigurationName"], r["RuleEvaluationStatus"], r.get("StatusDetails") or "") for r in rows]
