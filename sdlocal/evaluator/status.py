"""The rule evaluation status, in SageMaker's words (DescribeTrainingJob's
`DebugRuleEvaluationStatuses` entries), and its JSON file `<rule-output>/status.json`."""
from __future__ import annotations

import datetime as _dt
import enum
import hashlib
import json
import os
import re
from dataclasses import dataclass, replace
from typing import Any

from sdlocal.evaluator.errors import CorruptStatusError
from sdlocal.trial.errors import one_line
from sdlocal.trial.storage import Storage

STATUS_KEY = "status.json"
MAX_DETAILS = 1024
# The account of every ARN sdlocal shows: moto's default, so that the ARNs the SDK sees from
# `sdlocal serve` and those of moto's own resources agree.
ACCOUNT = "123456789012"
DEFAULT_REGION = "us-east-1"


class Status(str, enum.Enum):
    IN_PROGRESS = "InProgress"
    ISSUES_FOUND = "IssuesFound"
    NO_ISSUES_FOUND = "NoIssuesFound"
    ERROR = "Error"
    STOPPING = "Stopping"
    STOPPED = "Stopped"

    @property
    def is_final(self) -> bool:
        return self not in (Status.IN_PROGRESS, Status.STOPPING)


def condition_met_details(rule_name: str, step: int) -> str:
    return (
        f"RuleEvaluationConditionMet: Evaluation of the rule {rule_name} at step {step} "
        "resulted in the condition being met"
    )


def client_error_details(message: str) -> str:
    message = message.strip()
    return message if message.startswith("ClientError: ") else f"ClientError: {message}"


def arn(resource: str, name: str, region: str | None = None) -> str:
    """`arn:aws:sagemaker:<region>:<account>:<resource>/<name>`: every ARN sdlocal shows goes
    through here (training jobs, rule evaluations). `region`: default AWS_DEFAULT_REGION, else
    AWS_REGION, else us-east-1."""
    region = region or os.environ.get("AWS_DEFAULT_REGION") or os.environ.get("AWS_REGION") or DEFAULT_REGION
    return f"arn:aws:sagemaker:{region}:{ACCOUNT}:{resource}/{name}"


def rule_job_arn(job_name: str, rule_configuration_name: str, region: str | None = None) -> str:
    """A rule evaluation's ARN (a processing job on SageMaker), stable for a (job, rule) pair:
    `...:processing-job/<job>-<rule>-<8 hex>` (name ≤ 63)."""

    def clean(text: str, limit: int) -> str:
        text = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
        return text[:limit].strip("-") or "x"

    digest = hashlib.sha1(f"{job_name}/{rule_configuration_name}".encode()).hexdigest()[:8]
    name = f"{clean(job_name, 26)}-{clean(rule_configuration_name, 26)}-{digest}"
    return arn("processing-job", name, region)


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)


def _iso(ts: _dt.datetime) -> str:
    return ts.astimezone(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class RuleStatus:
    rule_configuration_name: str
    status: Status
    status_details: str = ""
    last_modified_time: _dt.datetime | None = None
    job_arn: str = ""
    last_evaluated_step: int | None = None

    def __post_init__(self) -> None:
        if len(self.status_details) > MAX_DETAILS:
            object.__setattr__(self, "status_details", self.status_details[: MAX_DETAILS - 3] + "...")

    def with_changes(self, **changes: Any) -> RuleStatus:
        return replace(self, **changes)

    def same_as(self, other: RuleStatus | None) -> bool:
        """Equal apart from the modification time (i.e. nothing worth rewriting)."""
        return other is not None and replace(other, last_modified_time=self.last_modified_time) == self

    def to_dict(self) -> dict[str, Any]:
        return {
            "RuleConfigurationName": self.rule_configuration_name,
            "RuleEvaluationStatus": self.status.value,
            "StatusDetails": self.status_details,
            "LastModifiedTime": _iso(self.last_modified_time or _now()),
            "RuleEvaluationJobArn": self.job_arn,
            "LastEvaluatedStep": self.last_evaluated_step,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RuleStatus:
        ts = data.get("LastModifiedTime")
        when = _dt.datetime.fromisoformat(ts.replace("Z", "+00:00")) if isinstance(ts, str) and ts else None
        step = data.get("LastEvaluatedStep")
        return cls(
            rule_configuration_name=str(data["RuleConfigurationName"]),
            status=Status(data["RuleEvaluationStatus"]),
            status_details=str(data.get("StatusDetails") or ""),
            last_modified_time=when,
            job_arn=str(data.get("RuleEvaluationJobArn") or ""),
            last_evaluated_step=int(step) if step is not None else None,
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> RuleStatus:
        return cls.from_dict(json.loads(text))


def write_status(storage: Storage, status: RuleStatus) -> None:
    """Write `status.json` at the root of the rule-output storage (atomic locally)."""
    if status.last_modified_time is None:
        status = status.with_changes(last_modified_time=_now())
    storage.write(STATUS_KEY, status.to_json().encode())


def read_status(storage: Storage) -> RuleStatus | None:
    """The status in the rule-output's `status.json` (None before one was written): the one reader
    of the file, for the evaluator, the launcher (through its status keepers while a job runs),
    `sdlocal summary` and `sdlocal serve`. A file that is not a status raises CorruptStatusError
    naming it."""
    try:
        body = storage.read(STATUS_KEY)
    except FileNotFoundError:
        return None
    try:
        return RuleStatus.from_json(body)
    except (ValueError, KeyError, TypeError, AttributeError) as e:  # not JSON or not a status object
        raise CorruptStatusError(f"{storage.uri}/{STATUS_KEY}: corrupt rule status ({one_line(e)})") from None
