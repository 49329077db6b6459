"""`python -m sdlocal.evaluator` as a subprocess: the environment contract, a real moto S3 server, a
custom rule from S3, and a trial that grows while the evaluator runs."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from sdlocal.trial import TrialWriter
from tests.evaluator._trials import COLLECTIONS

REPO = Path(__file__).resolve().parents[2]


def run_evaluator(env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("SDLOCAL_")}
    full.update(env)
    full["PYTHONPATH"] = str(REPO) + os.pathsep + full.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "sdlocal.evaluator"], cwd=REPO, env=full, capture_output=True, text=True, timeout=timeout)


def upload_dir(s3_client, bucket: str, root: Path, prefix: str) -> None:  # type: ignore[no-untyped-def]
    for path in sorted(root.rglob("*")):
        if path.is_file():
            s3_client.put_object(Bucket=bucket, Key=f"{prefix}/{path.relative_to(root).as_posix()}", Body=path.read_bytes())


def contract(bucket: str, endpoint: str, rule_cfg: str, params: dict[str, str]) -> dict[str, str]:
    return {
        "SDLOCAL_JOB_NAME": "my-job",
        "SDLOCAL_RULE_CONFIGURATION_NAME": rule_cfg,
        "SDLOCAL_RULE_PARAMETERS": json.dumps(params),
        "SDLOCAL_DEBUG_OUTPUT": f"s3://{bucket}/out/my-job/debug-output",
        "SDLOCAL_RULE_OUTPUT": f"s3://{bucket}/out/my-job/rule-output/{rule_cfg}",
        "AWS_ENDPOINT_URL_S3": endpoint,
        "SDLOCAL_POLL_INTERVAL_S": "0.2",
        "SDLOCAL_COLLECTIONS_TIMEOUT_S": "5",
    }


def status_from_s3(s3_client, bucket: str, rule_cfg: str) -> dict:  # type: ignore[no-untyped-def]
    body = s3_client.get_object(Bucket=bucket, Key=f"out/my-job/rule-output/{rule_cfg}/status.json")["Body"].read()
    return json.loads(body)


@pytest.mark.slow
def test_builtin_rule_against_moto(fixture_trials: Path, s3_client, bucket: str, moto_server: str) -> None:  # type: ignore[no-untyped-def]
    upload_dir(s3_client, bucket, fixture_trials / "vanishing", "out/my-job/debug-output")
    proc = run_evaluator(contract(bucket, moto_server, "VanishingGradient", {"rule_to_invoke": "VanishingGradient"}))
    assert proc.returncode == 0, proc.stderr
    status = status_from_s3(s3_client, bucket, "VanishingGradient")
    assert status["RuleEvaluationStatus"] == "IssuesFound"
    assert status["StatusDetails"] == (
        "RuleEvaluationConditionMet: Evaluation of the rule VanishingGradient at step 0 resulted in the condition being met"
    )
    assert status["LastEvaluatedStep"] == 59
    assert status["RuleEvaluationJobArn"].startswith("arn:aws:sagemaker:us-east-1:123456789012:processing-job/my-job-")
    assert status["LastModifiedTime"].endswith("Z")


@pytest.mark.slow
def test_bad_parameter_is_error_naming_it(s3_client, bucket: str, moto_server: str) -> None:  # type: ignore[no-untyped-def]
    params = {"rule_to_invoke": "VanishingGradient", "threshold": "tiny"}
    proc = run_evaluator(contract(bucket, moto_server, "VG", params))
    assert proc.returncode == 1
    status = status_from_s3(s3_client, bucket, "VG")
    assert status["RuleEvaluationStatus"] == "Error"
    assert status["StatusDetails"] == (
        "ClientError: Rule VanishingGradient: invalid value 'tiny' for parameter 'threshold': expected a number"
    )


@pytest.mark.slow
def test_no_debug_data(s3_client, bucket: str, moto_server: str) -> None:  # type: ignore[no-untyped-def]
    s3_client.put_object(Bucket=bucket, Key="out/my-job/debug-output/training_job_end.ts", Body=b"")
    proc = run_evaluator(contract(bucket, moto_server, "ExplodingTensor", {"rule_to_invoke": "ExplodingTensor"}))
    assert proc.returncode == 1
    details = status_from_s3(s3_client, bucket, "ExplodingTensor")["StatusDetails"]
    assert details.startswith("ClientError: No debugging data was saved by the training job.")
    assert details.endswith("Training job has ended. All the collection files could not be loaded")


@pytest.mark.slow
def test_custom_rule_from_s3(fixture_trials: Path, s3_client, bucket: str, moto_server: str) -> None:  # type: ignore[no-untyped-def]
    from tests.evaluator.test_registry import SMDEBUG_STYLE_RULE

    upload_dir(s3_client, bucket, fixture_trials / "exploding", "out/my-job/debug-output")
    s3_client.put_object(Bucket=bucket, Key="rules/my_rule.py", Body=SMDEBUG_STYLE_RULE.encode())
    s3_client.put_object(Bucket=bucket, Key="rules/broken.py", Body=b"def oops(:\n")
    good = {"source_s3_uri": f"s3://{bucket}/rules/my_rule.py", "rule_to_invoke": "CustomGradientRule", "threshold": "120",
            "start_step": "1", "end_step": "6"}
    proc = run_evaluator(contract(bucket, moto_server, "CustomRule", good))
    assert proc.returncode == 0, proc.stderr
    status = status_from_s3(s3_client, bucket, "CustomRule")
    assert status["RuleEvaluationStatus"] == "IssuesFound"  # lr 1e6: gradients far above 120
    assert "rule CustomGradientRule at step 1 resulted" in status["StatusDetails"]
    assert status["LastEvaluatedStep"] == 5  # end_step is exclusive

    bad = dict(good, source_s3_uri=f"s3://{bucket}/rules/broken.py")
    proc = run_evaluator(contract(bucket, moto_server, "Broken", bad))
    assert proc.returncode == 1
    details = status_from_s3(s3_client, bucket, "Broken")["StatusDetails"]
    assert details.startswith("ClientError: Custom rule file ") and "broken.py" in details and "SyntaxError" in details


def test_missing_variable_without_output_exits_2(tmp_path: Path) -> None:
    proc = run_evaluator({"SDLOCAL_JOB_NAME": "j"})
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == "evaluator: SDLOCAL_RULE_PARAMETERS: is not set"


def test_missing_variable_with_output_writes_error(tmp_path: Path) -> None:
    out = tmp_path / "rule-output"
    proc = run_evaluator({"SDLOCAL_RULE_OUTPUT": str(out), "SDLOCAL_RULE_CONFIGURATION_NAME": "VG",
                          "SDLOCAL_RULE_PARAMETERS": '{"rule_to_invoke": "VanishingGradient"}'})
    assert proc.returncode == 1
    status = json.loads((out / "status.json").read_text())
    assert status["RuleEvaluationStatus"] == "Error"
    assert status["StatusDetails"] == "ClientError: SDLOCAL_JOB_NAME: is not set"


@pytest.mark.slow
def test_live_trial_grows_while_the_evaluator_runs(tmp_path: Path) -> None:
    trial_dir, out = tmp_path / "debug-output", tmp_path / "rule-output"
    writer = TrialWriter(trial_dir)

    def train() -> None:
        time.sleep(0.5)
        writer.write_collections(COLLECTIONS)
        for step in range(30):
            value = np.nan if step == 20 else 1.0
            writer.write_step(step, "TRAIN", step, [("Net_fc1.weight", np.full(4, value, np.float32))])
            time.sleep(0.03)
        writer.write_end_marker()

    thread = threading.Thread(target=train)
    env = {
        "SDLOCAL_JOB_NAME": "live", "SDLOCAL_RULE_CONFIGURATION_NAME": "ExplodingTensor",
        "SDLOCAL_RULE_PARAMETERS": '{"rule_to_invoke": "ExplodingTensor"}',
        "SDLOCAL_DEBUG_OUTPUT": str(trial_dir), "SDLOCAL_RULE_OUTPUT": str(out),
        "SDLOCAL_POLL_INTERVAL_S": "0.1", "SDLOCAL_DEADLINE_S": "60",
    }
    thread.start()
    try:
        proc = run_evaluator(env)
    finally:
        thread.join()
    assert proc.returncode == 0, proc.stderr
    status = json.loads((out / "status.json").read_text())
    assert status["RuleEvaluationStatus"] == "IssuesFound"
    assert "rule ExplodingTensor at step 20 resulted" in status["StatusDetails"]
    assert status["LastEvaluatedStep"] == 29
    assert "ExplodingTensor: InProgress" in proc.stderr  # reported before the data arrived


@pytest.mark.slow
def test_sigterm_stops_with_status_stopped(tmp_path: Path) -> None:
    trial_dir, out = tmp_path / "debug-output", tmp_path / "rule-output"
    TrialWriter(trial_dir).write_collections(COLLECTIONS)  # training never ends
    env = {k: v for k, v in os.environ.items() if not k.startswith("SDLOCAL_")}
    env.update({
        "SDLOCAL_JOB_NAME": "j", "SDLOCAL_RULE_CONFIGURATION_NAME": "EX",
        "SDLOCAL_RULE_PARAMETERS": '{"rule_to_invoke": "ExplodingTensor"}',
        "SDLOCAL_DEBUG_OUTPUT": str(trial_dir), "SDLOCAL_RULE_OUTPUT": str(out), "SDLOCAL_POLL_INTERVAL_S": "0.1",
        "PYTHONPATH": str(REPO),
    })
    proc = subprocess.Popen([sys.executable, "-m", "sdlocal.evaluator"], cwd=REPO, env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not (out / "status.json").exists():  # wait for InProgress, with a deadline
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        proc.terminate()
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    assert json.loads((out / "status.json").read_text())["RuleEvaluationStatus"] == "Stopped"


def test_an_s3_that_never_answers_gives_lines_not_tracebacks() -> None:
    from tests.moto_process import free_port

    env = contract("nobucket", f"http://127.0.0.1:{free_port()}", "LossNotDecreasing",
                   {"rule_to_invoke": "LossNotDecreasing"})
    env["SDLOCAL_S3_RETRY_S"] = "1"
    proc = run_evaluator(env, timeout=60)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert "cannot write the status to s3://nobucket/out/my-job/rule-output/LossNotDecreasing" in proc.stderr
    assert "cannot write the final status" in proc.stderr
    assert "does not answer" in proc.stderr  # the outage, said once per endpoint
