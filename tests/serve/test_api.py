"""The SageMaker API of `sdlocal serve` through boto3 (in-process server on a free port): the
service's errors and shapes, ListTrainingJobs, a job that fails before training."""
from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from sdlocal.launcher.serve.app import ServeServer


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServeServer]:
    lines: list[str] = []
    srv = ServeServer(tmp_path / "home", port=0, runtime="process", echo=lines.append)
    srv.start()
    try:
        yield srv
    finally:
        assert srv.stop(timeout=60) == []


def client(server: ServeServer, service: str = "sagemaker") -> Any:
    return boto3.client(service, endpoint_url=server.url, region_name="us-east-1",
                        aws_access_key_id="x", aws_secret_access_key="x")


def request(name: str, **extra: Any) -> dict[str, Any]:
    return {
        "TrainingJobName": name, "RoleArn": "arn:aws:iam::123456789012:role/r",
        "AlgorithmSpecification": {"TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.1.0-cpu-py310",
                                   "TrainingInputMode": "File"},
        "HyperParameters": {"sagemaker_program": '"train.py"',
                            "sagemaker_submit_directory": f'"s3://sdlocal/{name}/source/sourcedir.tar.gz"'},
        "OutputDataConfig": {"S3OutputPath": "s3://sdlocal/"},
        "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": 600}, **extra,
    }


def error_of(call: Any, **kwargs: Any) -> tuple[str, str]:
    with pytest.raises(ClientError) as info:
        call(**kwargs)
    return info.value.response["Error"]["Code"], info.value.response["Error"]["Message"]


def wait_status(sm: Any, name: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        desc = sm.describe_training_job(TrainingJobName=name)
        if desc["TrainingJobStatus"] in ("Completed", "Failed", "Stopped") or time.monotonic() > deadline:
            return desc
        time.sleep(0.2)


def test_unknown_job_is_resource_not_found(server: ServeServer) -> None:
    sm = client(server)
    assert error_of(sm.describe_training_job, TrainingJobName="nope")[0] == "ResourceNotFound"
    assert error_of(sm.stop_training_job, TrainingJobName="nope")[0] == "ResourceNotFound"


def test_bad_request_is_validation_exception_naming_the_field(server: ServeServer) -> None:
    sm = client(server)
    bad = request("bad-rule", DebugRuleConfigurations=[{
        "RuleConfigurationName": "R", "RuleEvaluatorImage": "x",
        "RuleParameters": {"rule_to_invoke": "NoSuchRule"}}])
    code, message = error_of(sm.create_training_job, **bad)
    assert code == "ValidationException"
    assert "rule_to_invoke" in message and "NoSuchRule" in message
    assert sm.list_training_jobs()["TrainingJobSummaries"] == []  # nothing was created


def test_failed_job_list_and_describe(server: ServeServer) -> None:
    sm = client(server)
    # no sourcedir.tar.gz was uploaded: the job fails while downloading, as on SageMaker
    arns = [sm.create_training_job(**request(name))["TrainingJobArn"] for name in ("job-a", "job-b")]
    assert arns[0] == "arn:aws:sagemaker:us-east-1:123456789012:training-job/job-a"
    desc = wait_status(sm, "job-a")
    assert desc["TrainingJobStatus"] == "Failed"
    assert "sourcedir.tar.gz" in desc["FailureReason"]
    assert desc["SecondaryStatus"] == "Failed"
    assert [t["Status"] for t in desc["SecondaryStatusTransitions"]] == ["Starting", "Downloading", "Failed"]
    assert desc["OutputDataConfig"] == {"KmsKeyId": "", "S3OutputPath": "s3://sdlocal/"}
    assert desc["ModelArtifacts"] == {"S3ModelArtifacts": "s3://sdlocal/job-a/output/model.tar.gz"}
    assert desc["ProfilingStatus"] == "Disabled"
    assert "TrainingStartTime" not in desc  # it never trained
    wait_status(sm, "job-b")

    code, _ = error_of(sm.create_training_job, **request("job-a"))
    assert code == "ResourceInUse"
    code, message = error_of(sm.stop_training_job, TrainingJobName="job-a")
    assert code == "ValidationException" and "Failed" in message

    listed = sm.list_training_jobs()["TrainingJobSummaries"]
    assert [j["TrainingJobName"] for j in listed] == ["job-b", "job-a"]  # newest first
    assert set(listed[0]) == {"TrainingJobName", "TrainingJobArn", "CreationTime", "LastModifiedTime",
                              "TrainingJobStatus", "SecondaryStatus"}
    page = sm.list_training_jobs(MaxResults=1, SortBy="Name", SortOrder="Ascending")
    assert [j["TrainingJobName"] for j in page["TrainingJobSummaries"]] == ["job-a"]
    page = sm.list_training_jobs(MaxResults=1, SortBy="Name", SortOrder="Ascending", NextToken=page["NextToken"])
    assert [j["TrainingJobName"] for j in page["TrainingJobSummaries"]] == ["job-b"]
    assert "NextToken" not in page
    assert sm.list_training_jobs(StatusEquals="Completed")["TrainingJobSummaries"] == []
    assert [j["TrainingJobName"] for j in sm.list_training_jobs(NameContains="-B")["TrainingJobSummaries"]] == ["job-b"]


def test_other_services_reach_moto(server: ServeServer) -> None:
    s3 = client(server, "s3")
    assert "sdlocal" in [b["Name"] for b in s3.list_buckets()["Buckets"]]  # the SDK config's DefaultS3Bucket
    logs = client(server, "logs")
    assert logs.describe_log_groups(logGroupNamePrefix="/aws/sagemaker/TrainingJobs")["logGroups"]
    sm = client(server)
    code, message = error_of(sm.list_endpoints)
    assert code == "UnknownOperationException" and "ListEndpoints" in message


def test_a_log_outage_is_said_once_and_the_log_goes_on(tmp_path: Path) -> None:
    """CloudWatch Logs loses the job's log group while the job runs: the serve log says so once
    (not at each try), the group and stream are made again and the later lines arrive."""
    import io
    import tarfile

    lines: list[str] = []
    srv = ServeServer(tmp_path / "home", port=0, runtime="process", echo=lines.append)
    srv.start()
    try:
        script = ("import time\nfor i in range(40):\n    print(f'line {i}', flush=True)\n"
                  "    if i == 19:\n        time.sleep(6)\n    time.sleep(0.05)\n")
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            info = tarfile.TarInfo("train.py")
            info.size = len(script)
            tar.addfile(info, io.BytesIO(script.encode()))
        client(srv, "s3").put_object(Bucket="sdlocal", Key="log-outage/source/sourcedir.tar.gz", Body=buf.getvalue())
        sm, logs = client(srv), client(srv, "logs")
        sm.create_training_job(**request("log-outage"))
        group = "/aws/sagemaker/TrainingJobs"
        deadline = time.monotonic() + 60
        while not logs.describe_log_streams(logGroupName=group, logStreamNamePrefix="log-outage/")["logStreams"]:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        time.sleep(1.5)  # the first lines are in; the training sleeps after line 19
        logs.delete_log_group(logGroupName=group)
        assert wait_status(sm, "log-outage")["TrainingJobStatus"] == "Completed"
        stream = logs.describe_log_streams(logGroupName=group, logStreamNamePrefix="log-outage/")["logStreams"]
        events = logs.get_log_events(logGroupName=group, logStreamName=stream[0]["logStreamName"],
                                     startFromHead=True)["events"]
        assert [e["message"] for e in events][-20:] == [f"line {i}" for i in range(20, 40)]
    finally:
        assert srv.stop(timeout=60) == []
    warnings = [line for line in lines if "CloudWatch Logs" in line]
    assert len(warnings) == 1, lines
    assert warnings[0].startswith("[log-outage] Warning: sending the training log to CloudWatch Logs failed, "
                                  "trying again: ResourceNotFoundException")
