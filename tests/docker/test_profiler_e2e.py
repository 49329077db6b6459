"""The profiler end to end under `sdlocal run --runtime docker` (issue 10, "Done when"): the docker
twin of tests/launcher/e2e/test_e2e_profiler.py with the real evaluator image (no stand-in).

(a) a job as the SDK builds it (default ProfilerConfig, ProfilerReport beside a Debugger rule):
    the training container sampled into profiler-output/system/, ProfilerReport's own evaluator
    container, its status after the Debugger rule's in `run` and `summary --json`, its eleven JSON
    reports and profiler-report.html (drawn by matplotlib in the evaluator image) in S3, the page
    checked in headless Chromium on the host.
(b) examples/profiler-job.yaml: one evaluator container per profiler rule, a verdict and a report
    each, nothing left behind."""
from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.chromium import render_page
from tests.docker._events import created_containers
from tests.docker.test_runtime import REPO, finish, leftovers, sdlocal
from tests.launcher.e2e.test_e2e_profiler import (
    FINAL_OK,
    PROFILER_RULES,
    check_page,
    check_reports,
    hook_writes_a_timeline,
    keys,
    read_json,
    sdk_request,
)

pytestmark = pytest.mark.docker


def rule_names(created: list[dict[str, str]]) -> list[str]:
    """The rule names of the evaluator containers created (tests/docker/_events.py), sorted."""
    return sorted(a["sdlocal.rule"] for a in created if a.get("sdlocal.role") == "rule")


def test_sdk_job_with_profiler_report_in_containers(docker_client: Any, sdlocal_images: Any, moto_server: str,
                                                    s3_client: Any, tmp_path: Path) -> None:
    job, report_name = f"dk-sdkprof-{uuid.uuid4().hex[:6]}", "ProfilerReport-1700000000"
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps(sdk_request(report_name)))
    with created_containers(docker_client, job) as created:
        code, statuses, err = finish(sdlocal(["run", str(spec), "--job-name", job], tmp_path, moto_server),
                                     timeout=540)
    assert code == 0, err
    assert "Runtime: docker" in err and "not evaluated yet" not in err
    assert "System metrics of the training container every 500 ms" in err
    assert [s["RuleConfigurationName"] for s in statuses] == ["LossNotDecreasing", report_name]
    assert {s["RuleEvaluationStatus"] for s in statuses} <= FINAL_OK, statuses
    assert rule_names(created) == sorted(["LossNotDecreasing", report_name])

    profiler = keys(s3_client, f"jobs/{job}/profiler-output/")
    system = [k for k in profiler if k.startswith("system/incremental/")]
    assert len(system) >= 3 and all(k.endswith(".algo-1.json") for k in system)
    assert {"system/training_job_end.ts", "framework/training_job_end.ts"} <= set(profiler)
    if hook_writes_a_timeline():
        assert [k for k in profiler if k.startswith("framework/pevents/")], profiler

    rule_output = f"jobs/{job}/rule-output/{report_name}"
    check_reports(s3_client, rule_output, PROFILER_RULES)
    page = s3_client.get_object(Bucket="sdlocal", Key=f"{rule_output}/profiler-output/profiler-report.html")
    html_file = tmp_path / "profiler-report.html"
    html_file.write_bytes(page["Body"].read())
    check_page(render_page(html_file, tmp_path, ["figure.plot svg", "table.rules tbody tr", "div.cards .card"]))

    summary = subprocess.run([sys.executable, "-m", "sdlocal", "summary", job, "--json", "--work-dir",
                              str(tmp_path / "jobs" / job), "--s3-endpoint-url", moto_server],
                             cwd=REPO, capture_output=True, text=True, timeout=60)
    assert summary.returncode == 0, summary.stderr
    # summary --json is rule_job_summary()'s shape (no LastEvaluatedStep): the same rules and verdicts
    def verdicts(rows: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
        return [(r["RuleConfigurationName"], r["RuleEvaluationStatus"], r.get("StatusDetails", "")) for r in rows]

    assert verdicts(json.loads(summary.stdout)) == verdicts(statuses)
    assert leftovers(docker_client, job) == []


def test_every_profiler_rule_in_its_own_container(docker_client: Any, sdlocal_images: Any, moto_server: str,
                                                  s3_client: Any, tmp_path: Path) -> None:
    job = f"dk-allprof-{uuid.uuid4().hex[:6]}"
    with created_containers(docker_client, job) as created:
        code, statuses, err = finish(sdlocal(["run", "examples/profiler-job.yaml", "--job-name", job], tmp_path,
                                             moto_server), timeout=540)
    assert code == 0, err
    names = ["LossNotDecreasing", "ProfilerReport", *PROFILER_RULES]
    assert [s["RuleConfigurationName"] for s in statuses] == names
    assert {s["RuleEvaluationStatus"] for s in statuses} <= FINAL_OK, statuses
    assert rule_names(created) == sorted(names)
    for name in names[1:]:
        rule_output = f"jobs/{job}/rule-output/{name}"
        check_reports(s3_client, rule_output, PROFILER_RULES if name == "ProfilerReport" else (name,))
        assert read_json(s3_client, f"{rule_output}/status.json")["RuleEvaluationStatus"] in FINAL_OK
    assert keys(s3_client, f"jobs/{job}/rule-output/ProfilerReport/profiler-output/profiler-report.html")
    assert leftovers(docker_client, job) == []
