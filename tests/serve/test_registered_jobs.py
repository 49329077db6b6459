"""A job created through `sdlocal serve` is registered like one of `sdlocal run` (both take
launcher/job/run.py's path): `sdlocal logs`, `summary` and `stop` work on it from another terminal,
and `stop` stops it through its launcher (rules Stopped) instead of removing what runs."""
from __future__ import annotations

import io
import json
import tarfile
import time
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.conftest import REPO_ROOT
from tests.serve.conftest import sdlocal

pytestmark = pytest.mark.slow
JOB = "served-registered"


def clients(exports: dict[str, str]) -> tuple[Any, Any]:
    kwargs = {"endpoint_url": exports["AWS_ENDPOINT_URL"], "region_name": "us-east-1",
              "aws_access_key_id": exports["AWS_ACCESS_KEY_ID"], "aws_secret_access_key": exports["AWS_SECRET_ACCESS_KEY"]}
    return boto3.client("sagemaker", **kwargs), boto3.client("s3", **kwargs)


def sourcedir() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(REPO_ROOT / "examples" / "train.py", arcname="train.py")
    return buf.getvalue()


def wait(what: str, check: Any, timeout: float = 180) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.5)


def test_stop_logs_and_summary_of_a_served_job(served: tuple[Path, dict[str, str]]) -> None:
    home, exports = served
    sm, s3 = clients(exports)
    s3.put_object(Bucket="sdlocal", Key=f"{JOB}/source/sourcedir.tar.gz", Body=sourcedir())
    sm.create_training_job(
        TrainingJobName=JOB, RoleArn="arn:aws:iam::123456789012:role/r",
        AlgorithmSpecification={"TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.1.0-cpu-py310",
                                "TrainingInputMode": "File"},
        # the training hangs at step 20 (a stuck data loader) until it is stopped
        HyperParameters={"sagemaker_program": '"train.py"',
                         "sagemaker_submit_directory": f'"s3://sdlocal/{JOB}/source/sourcedir.tar.gz"',
                         "steps": "400", "stall-at-step": "20", "stall-seconds": "600"},
        OutputDataConfig={"S3OutputPath": "s3://sdlocal/"}, StoppingCondition={"MaxRuntimeInSeconds": 900},
        ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
        DebugHookConfig={"S3OutputPath": "s3://sdlocal/", "HookParameters": {"save_interval": "2"}},
        DebugRuleConfigurations=[{"RuleConfigurationName": "LossNotDecreasing",
                                  "RuleEvaluatorImage": "503895931360.dkr.ecr.us-east-1.amazonaws.com/sagemaker-debugger-rules:latest",
                                  "RuleParameters": {"rule_to_invoke": "LossNotDecreasing"}}])
    # registered while it runs, as `sdlocal run` registers its jobs
    wait("the job's record in $SDLOCAL_HOME/running", lambda: (home / "running" / f"{JOB}.json").is_file())
    logs = wait("step 10 in `sdlocal logs`",
                lambda: (out := sdlocal(home, "logs", JOB)).returncode == 0 and "step 10 " in out.stdout and out)
    assert logs.stderr == ""
    summary = sdlocal(home, "summary", JOB, "--json")  # from the S3 the job ran on (serve's), found in its record
    assert summary.returncode == 0, summary.stderr
    assert [row["RuleConfigurationName"] for row in json.loads(summary.stdout)] == ["LossNotDecreasing"]

    stopped = sdlocal(home, "stop", JOB, timeout=180)
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout.strip() == f"stopped job {JOB}"  # through its launcher, not by removing containers
    desc = wait("Stopped", lambda: (d := sm.describe_training_job(TrainingJobName=JOB))["TrainingJobStatus"]
                in ("Stopped", "Failed", "Completed") and d)
    assert desc["TrainingJobStatus"] == "Stopped", desc.get("FailureReason")
    statuses = wait("the rule's final status",
                    lambda: [s["RuleEvaluationStatus"] for s in sm.describe_training_job(TrainingJobName=JOB)
                             ["DebugRuleEvaluationStatuses"] if s["RuleEvaluationStatus"] != "InProgress"])
    assert statuses == ["Stopped"]
    assert not (home / "running" / f"{JOB}.json").exists()
    again = sdlocal(home, "stop", JOB)
    assert again.returncode == 0 and again.stdout.strip() == f"job {JOB} is not running"
