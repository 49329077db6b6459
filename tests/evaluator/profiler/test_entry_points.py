"""Profiler rules through their entry points: `python -m sdlocal.evaluator` (SDLOCAL_PROFILER_OUTPUT, live
on a real moto S3 while files are uploaded), `run_rule` on moto with the uploads driven by the
loop's sleep, `sdlocal evaluate` on a job folder and an S3 prefix, and custom profiler rules."""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from sdlocal.evaluator.api import evaluate_trial, find_profiler_output, run_rule
from sdlocal.evaluator.errors import EvaluatorError
from sdlocal.evaluator.status import Status
from sdlocal.launcher.cli import cli
from tests.evaluator._trials import Clock
from tests.evaluator.profiler._streams import JobWriter, machine
from tests.evaluator.test_main import run_evaluator, status_from_s3, upload_dir

CUSTOM_RULE = '''
from sdlocal.evaluator import ProfilerRule


class SlowTrainSteps(ProfilerRule):
    """Fires when a TRAIN step takes longer than threshold_s."""

    streams = frozenset({"framework"})

    def __init__(self, base_trial, threshold_s="0.5", scan_interval_us="60000000"):
        super().__init__(base_trial, scan_interval_us=scan_interval_us)
        self.threshold_us = float(threshold_s) * 1e6
        self.report["Details"]["slow_steps"] = []

    def invoke_at_window(self, start_us, end_us):
        steps = self.base_trial.framework.steps(mode="TRAIN", start_us=start_us, end_us=end_us)
        slow = steps.step[(steps.duration_us > self.threshold_us) & (steps.start_us >= start_us)]
        self.report["Details"]["slow_steps"] += slow.tolist()
        return bool(slow.size)
'''


def slow_step_job(root: Path, slow: int = 11) -> Path:
    rng = np.random.default_rng(0)
    durations = list(np.clip(rng.normal(0.1, 0.004, 150), 0.05, None))
    for i in range(slow):
        durations[5 + i * 13] = 1.5
    JobWriter(root).system(60, lambda i: machine(cpu=[30, 30])).steps(durations).end()
    return root


def contract(bucket: str, endpoint: str, rule_cfg: str, params: dict[str, str]) -> dict[str, str]:
    return {
        "SDLOCAL_JOB_NAME": "my-job", "SDLOCAL_RULE_CONFIGURATION_NAME": rule_cfg,
        "SDLOCAL_RULE_PARAMETERS": json.dumps(params),
        "SDLOCAL_DEBUG_OUTPUT": f"s3://{bucket}/out/my-job/debug-output",
        "SDLOCAL_PROFILER_OUTPUT": f"s3://{bucket}/out/my-job/profiler-output",
        "SDLOCAL_RULE_OUTPUT": f"s3://{bucket}/out/my-job/rule-output/{rule_cfg}",
        "AWS_ENDPOINT_URL_S3": endpoint, "SDLOCAL_POLL_INTERVAL_S": "0.2", "SDLOCAL_DEADLINE_S": "120",
    }


@pytest.mark.slow
def test_python_m_evaluator_follows_uploads_to_moto(tmp_path: Path, s3_client, bucket: str,  # type: ignore[no-untyped-def]
                                                    moto_server: str) -> None:
    local = tmp_path / "profiler"
    job = JobWriter(local)
    uploaded: set[Path] = set()

    def upload() -> None:
        for path in sorted(local.rglob("*.json")):
            if path not in uploaded:
                uploaded.add(path)
                s3_client.put_object(Bucket=bucket, Key=f"out/my-job/profiler-output/{path.relative_to(local).as_posix()}",
                                     Body=path.read_bytes())

    def train() -> None:  # the sampler and the hook writing, the platform uploading
        time.sleep(0.5)
        for chunk in range(6):
            job.system(10, lambda i: machine(cpu=[97, 5], gpus=[(3, 40)]))
            job.steps([0.1] * 20, first_step=chunk * 20)
            upload()
            time.sleep(0.2)
        job.flush()
        upload()
        s3_client.put_object(Bucket=bucket, Key="out/my-job/profiler-output/system/training_job_end.ts", Body=b"")

    thread = threading.Thread(target=train)
    thread.start()
    try:
        proc = run_evaluator(contract(bucket, moto_server, "ProfilerReport-1", {
            "rule_to_invoke": "ProfilerReport", "CPUBottleneck_patience": "10"}))
    finally:
        thread.join()
    assert proc.returncode == 0, proc.stderr
    status = status_from_s3(s3_client, bucket, "ProfilerReport-1")
    assert status["RuleEvaluationStatus"] == "IssuesFound"
    assert status["StatusDetails"] == ("RuleEvaluationConditionMet: Evaluation of the rule ProfilerReport at step 0 "
                                       "resulted in the condition being met")
    assert "ProfilerReport-1: InProgress" in proc.stderr
    prefix = "out/my-job/rule-output/ProfilerReport-1/profiler-output/profiler-reports/"
    keys = [o["Key"][len(prefix):] for o in s3_client.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]]
    assert "CPUBottleneck.json" in keys and len([k for k in keys if k.endswith(".json")]) == 11
    report = json.loads(s3_client.get_object(Bucket=bucket, Key=prefix + "CPUBottleneck.json")["Body"].read())
    assert report["RuleTriggered"] == 1 and report["Datapoints"] == 60


@pytest.mark.slow
def test_python_m_evaluator_without_profiler_output_is_an_error(tmp_path: Path) -> None:
    out = tmp_path / "rule-output"
    proc = run_evaluator({"SDLOCAL_JOB_NAME": "j", "SDLOCAL_RULE_CONFIGURATION_NAME": "SO",
                          "SDLOCAL_RULE_PARAMETERS": '{"rule_to_invoke": "StepOutlier"}',
                          "SDLOCAL_DEBUG_OUTPUT": str(tmp_path / "debug-output"), "SDLOCAL_RULE_OUTPUT": str(out)})
    assert proc.returncode == 1
    assert json.loads((out / "status.json").read_text())["StatusDetails"] == (
        "ClientError: SDLOCAL_PROFILER_OUTPUT: is not set: StepOutlier is a profiler rule and the job has no ProfilerConfig")


def test_run_rule_live_on_moto(tmp_path: Path, s3_client, bucket: str, moto_server: str) -> None:  # type: ignore[no-untyped-def]
    """The loop's own sleep uploads the next files: every poll sees exactly one more chunk."""
    local = tmp_path / "profiler"
    job = JobWriter(local)
    chunks = [lambda: job.steps([0.1] * 60), lambda: job.steps([0.1] * 60),
              lambda: job.steps([2.0] * 12 + [0.1] * 10), lambda: job.flush()]
    polls: list[int] = []

    def sleep(_: float) -> None:
        if chunks:
            chunks.pop(0)()
            upload_dir(s3_client, bucket, local, "job/profiler-output")
        else:
            s3_client.put_object(Bucket=bucket, Key="job/debug-output/training_job_end.ts", Body=b"")
        polls.append(len(job.trace_writer.closed_files))

    statuses: list[tuple[int, Status]] = []  # (sleeps so far, status)
    final = run_rule(f"s3://{bucket}/job/debug-output", {"rule_to_invoke": "StepOutlier"},
                     rule_configuration_name="SO", job_name="job",
                     on_status=lambda st: statuses.append((len(polls), st.status)), interval=1.0,
                     clock=Clock(), sleep=sleep, s3_client=s3_client,
                     profiler_output=f"s3://{bucket}/job/profiler-output")
    assert final.status is Status.ISSUES_FOUND
    # fired at the poll after the third upload (142 steps, 12 of them slow), before the end marker
    assert statuses == [(0, Status.IN_PROGRESS), (3, Status.ISSUES_FOUND)]
    assert polls[:3] == [1, 2, 3] and len(polls) == 5


def test_find_profiler_output(tmp_path: Path) -> None:
    slow_step_job(tmp_path / "job" / "profiler-output")
    (tmp_path / "job" / "debug-output").mkdir()
    slow_step_job(tmp_path / "home" / "output" / "profiler")
    for given, found in [("job", "job/profiler-output"), ("job/profiler-output", "job/profiler-output"),
                         ("job/debug-output", "job/profiler-output"), ("home", "home/output/profiler")]:
        assert find_profiler_output(str(tmp_path / given)) == str(tmp_path / found)
    with pytest.raises(EvaluatorError, match=r"^No profiler data under .*/empty: none of .* holds system/ or framework/ files$"):
        find_profiler_output(str(tmp_path / "empty"))


def test_sdlocal_evaluate_on_a_job_folder_writes_reports(tmp_path: Path) -> None:
    slow_step_job(tmp_path / "job" / "profiler-output")
    out = tmp_path / "reports"
    result = CliRunner().invoke(cli, ["evaluate", str(tmp_path / "job"), "--rule", "StepOutlier", "--json",
                                      "--output", str(out)])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)
    assert row["RuleEvaluationStatus"] == "IssuesFound" and row["RuleConfigurationName"] == "StepOutlier"
    report = json.loads((out / "profiler-output" / "profiler-reports" / "StepOutlier.json").read_text())
    assert report["Details"]["step_details"]["TRAIN"]["number_of_outliers"] == 11
    result = CliRunner().invoke(cli, ["evaluate", str(tmp_path / "job"), "--rule", "StepOutlier", "--param", "n_outliers=11"])
    assert result.exit_code == 0 and "NoIssuesFound" in result.output


def test_sdlocal_evaluate_profiler_report_writes_the_html_report_locally(tmp_path: Path) -> None:
    slow_step_job(tmp_path / "home" / "output" / "profiler")  # an sdlocal job folder
    out = tmp_path / "reports"
    result = CliRunner().invoke(cli, ["evaluate", str(tmp_path / "home"), "--rule", "ProfilerReport", "--json",
                                      "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)[0]["RuleEvaluationStatus"] == "IssuesFound"
    assert (out / "profiler-output" / "profiler-reports" / "StepOutlier.json").is_file()
    page = (out / "profiler-output" / "profiler-report.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "StepOutlier" in page and "<svg" in page


def test_sdlocal_evaluate_errors_are_one_line(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = CliRunner().invoke(cli, ["evaluate", str(tmp_path / "empty"), "--rule", "ProfilerReport"])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        f"Error: ClientError: No profiler data under {tmp_path / 'empty'}: none of {tmp_path / 'empty'}, "
        f"{tmp_path / 'empty' / 'profiler-output'}, {tmp_path / 'empty' / 'output' / 'profiler'}, "
        f"{tmp_path / 'empty' / 'profiler'} holds system/ or framework/ files"]
    slow_step_job(tmp_path / "job")
    result = CliRunner().invoke(cli, ["evaluate", str(tmp_path / "job"), "--rule", "ProfilerReport", "--param",
                                      "StepOutlier_stdev=2"])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        "Error: ClientError: Rule ProfilerReport: invalid value '2' for parameter 'StepOutlier_stdev': StepOutlier has "
        "no parameter 'stdev' (it has: stddev, mode, n_outliers, scan_interval_us)"]


@pytest.mark.slow
def test_sdlocal_evaluate_an_s3_prefix(tmp_path: Path, s3_client, bucket: str, moto_server: str) -> None:  # type: ignore[no-untyped-def]
    upload_dir(s3_client, bucket, slow_step_job(tmp_path / "p"), "out/job-1/profiler-output")
    result = CliRunner().invoke(cli, ["evaluate", f"s3://{bucket}/out/job-1", "--rule", "ProfilerReport",
                                      "--s3-endpoint-url", moto_server, "--output", f"s3://{bucket}/eval", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)[0]["RuleEvaluationStatus"] == "IssuesFound"
    listed = s3_client.list_objects_v2(Bucket=bucket, Prefix="eval/profiler-output/profiler-reports/")["Contents"]
    assert len(listed) == 11


def test_custom_profiler_rule_from_a_file(tmp_path: Path) -> None:
    rule_file = tmp_path / "slow_steps.py"
    rule_file.write_text(CUSTOM_RULE)
    slow_step_job(tmp_path / "job" / "profiler-output", slow=2)
    out = tmp_path / "out"
    status = evaluate_trial(str(tmp_path / "job"), "SlowTrainSteps", {"threshold_s": "1.0"},
                            custom_rule_file=str(rule_file), report_output=str(out))
    assert status.status is Status.ISSUES_FOUND
    report = json.loads((out / "profiler-output" / "profiler-reports" / "SlowTrainSteps.json").read_text())
    assert report["Details"]["slow_steps"] == [5, 18]
    assert report["RuleTriggered"] == 1 and report["Violations"] == 1  # one window, judged met
    result = CliRunner().invoke(cli, ["evaluate", str(tmp_path / "job"), "--custom-rule", f"{rule_file}:SlowTrainSteps",
                                      "--param", "threshold_s=2"])
    assert result.exit_code == 0 and "NoIssuesFound" in result.output, result.output


@pytest.mark.slow
def test_custom_profiler_rule_in_the_evaluator_process(tmp_path: Path) -> None:
    (tmp_path / "slow_steps.py").write_text(CUSTOM_RULE)
    slow_step_job(tmp_path / "profiler-output")
    (tmp_path / "debug-output").mkdir()
    (tmp_path / "debug-output" / "training_job_end.ts").write_bytes(b"")
    out = tmp_path / "rule-output"
    proc = run_evaluator({
        "SDLOCAL_JOB_NAME": "j", "SDLOCAL_RULE_CONFIGURATION_NAME": "Slow",
        "SDLOCAL_RULE_PARAMETERS": json.dumps({"rule_to_invoke": "SlowTrainSteps", "threshold_s": "1",
                                               "source_s3_uri": str(tmp_path / "slow_steps.py")}),
        "SDLOCAL_DEBUG_OUTPUT": str(tmp_path / "debug-output"), "SDLOCAL_PROFILER_OUTPUT": str(tmp_path / "profiler-output"),
        "SDLOCAL_RULE_OUTPUT": str(out), "SDLOCAL_POLL_INTERVAL_S": "0.1"})
    assert proc.returncode == 0, proc.stderr
    assert json.loads((out / "status.json").read_text())["RuleEvaluationStatus"] == "IssuesFound"
    assert (out / "profiler-output" / "profiler-reports" / "SlowTrainSteps.json").is_file()
