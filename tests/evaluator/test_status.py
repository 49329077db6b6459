from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

from sdlocal.evaluator.status import (
    RuleStatus,
    Status,
    client_error_details,
    condition_met_details,
    read_status,
    rule_job_arn,
    write_status,
)
from sdlocal.trial.storage import open_storage


def test_json_shape_and_round_trip(tmp_path: Path) -> None:
    when = dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.timezone.utc)
    status = RuleStatus("VanishingGradient", Status.ISSUES_FOUND, condition_met_details("VanishingGradient", 1500),
                        when, rule_job_arn("my-job", "VanishingGradient"), 1500)
    data = json.loads(status.to_json())
    assert data == {
        "RuleConfigurationName": "VanishingGradient",
        "RuleEvaluationStatus": "IssuesFound",
        "StatusDetails": "RuleEvaluationConditionMet: Evaluation of the rule VanishingGradient at step 1500 "
        "resulted in the condition being met",
        "LastModifiedTime": "2026-11-22T10:00:00Z",
        "RuleEvaluationJobArn": data["RuleEvaluationJobArn"],
        "LastEvaluatedStep": 1500,
    }
    assert RuleStatus.from_json(status.to_json()) == status
    storage = open_storage(str(tmp_path))
    assert read_status(storage) is None
    write_status(storage, status)
    assert read_status(storage) == status


def test_arn_shape_is_sagemakers() -> None:
    arn = rule_job_arn("My_Job.2026", "VanishingGradient")
    assert re.fullmatch(r"arn:aws:sagemaker:us-east-1:\d{12}:processing-job/my-job-2026-vanishinggradient-[0-9a-f]{8}", arn)
    assert rule_job_arn("My_Job.2026", "VanishingGradient") == arn  # stable across rewrites
    assert len(rule_job_arn("j" * 200, "r" * 200).rsplit("/", 1)[1]) <= 63


def test_details_capped_and_client_error_prefix() -> None:
    status = RuleStatus("R", Status.ERROR, client_error_details("x" * 5000))
    assert len(status.status_details) == 1024 and status.status_details.startswith("ClientError: x")
    assert client_error_details("ClientError: already") == "ClientError: already"


def test_status_in_s3(s3_client, bucket: str, moto_server: str) -> None:  # type: ignore[no-untyped-def]
    storage = open_storage(f"s3://{bucket}/job/rule-output/VG", endpoint_url=moto_server)
    write_status(storage, RuleStatus("VG", Status.IN_PROGRESS))
    body = s3_client.get_object(Bucket=bucket, Key="job/rule-output/VG/status.json")["Body"].read()
    assert json.loads(body)["RuleEvaluationStatus"] == "InProgress"
    got = read_status(storage)
    assert got is not None and got.status is Status.IN_PROGRESS and got.last_modified_time is not None
