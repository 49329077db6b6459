"""The SageMaker API calls the SDK v2 makes for training jobs, in the service's shapes and errors:
CreateTrainingJob, DescribeTrainingJob, StopTrainingJob, ListTrainingJobs, ListTags (attach()).
Bad requests get `ValidationException`, unknown jobs `ResourceNotFound`, a name in use
`ResourceInUse`; any other operation `UnknownOperationException`, naming it."""
from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from sdlocal.launcher.errors import LauncherError
from sdlocal.launcher.job.record import JobStatus
from sdlocal.launcher.serve.jobs import ServedJob
from sdlocal.launcher.spec.model import JobSpec
from sdlocal.launcher.spec.parse import spec_from_request

_REQUIRED = ("TrainingJobName", "RoleArn", "OutputDataConfig")  # botocore's CreateTrainingJobRequest
_STATUSES = tuple(s.value for s in JobStatus)


class ApiError(Exception):
    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


def _not_found(name: str) -> ApiError:
    return ApiError("ResourceNotFound", f"Requested resource not found: training job {name!r}")


def _time(value: Any, field: str) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            pass
    raise ApiError("ValidationException", f"{field}: {value!r} is not a timestamp")


class SageMakerApi:
    """`call(operation, body)` -> the response body; raises ApiError. Jobs live as long as the server."""

    def __init__(self, create_job: Callable[[Mapping[str, Any], JobSpec], ServedJob], client: Any) -> None:
        self.create_job = create_job
        self.client = client  # S3, to read the rules' statuses
        self.jobs: dict[str, ServedJob] = {}
        self._lock = threading.Lock()

    def call(self, operation: str, body: Mapping[str, Any]) -> dict[str, Any]:
        handler = getattr(self, f"op_{operation}", None)
        if handler is None:
            raise ApiError("UnknownOperationException",
                           f"sdlocal serve does not implement SageMaker.{operation} (training jobs only)")
        return dict(handler(body))

    def job(self, body: Mapping[str, Any]) -> ServedJob:
        name = body.get("TrainingJobName")
        if not isinstance(name, str) or not name:
            raise ApiError("ValidationException", "TrainingJobName: required")
        job = self.jobs.get(name)
        if job is None:
            raise _not_found(name)
        return job

    def op_CreateTrainingJob(self, body: Mapping[str, Any]) -> dict[str, Any]:
        missing = [k for k in _REQUIRED if body.get(k) is None]  # null is no value
        if missing:
            raise ApiError("ValidationException", f"missing required field(s): {', '.join(missing)}")
        name = body["TrainingJobName"]
        try:
            spec = spec_from_request(body)
        except LauncherError as e:
            raise ApiError("ValidationException", " ".join(str(e).split())) from e
        with self._lock:
            if name in self.jobs:
                raise ApiError("ResourceInUse", "Training job names must be unique within an AWS account and "
                               f"region, and a training job with this name already exists ({self.jobs[name].arn})")
            try:
                job = self.create_job(body, spec)
            except LauncherError as e:  # the name claimed by an earlier `sdlocal run`, ...
                raise ApiError("ValidationException", " ".join(str(e).split())) from e
            self.jobs[name] = job
        job.start()
        return {"TrainingJobArn": job.arn}

    def op_DescribeTrainingJob(self, body: Mapping[str, Any]) -> dict[str, Any]:
        return self.job(body).describe()

    def op_StopTrainingJob(self, body: Mapping[str, Any]) -> dict[str, Any]:
        job = self.job(body)
        if job.status.ended:
            raise ApiError("ValidationException", f"The training job {job.name} is {job.status}: it cannot be stopped")
        job.request_stop()
        return {}

    def op_ListTrainingJobs(self, body: Mapping[str, Any]) -> dict[str, Any]:
        rows = [j.summary() for j in list(self.jobs.values())]
        for key, field, test in (("CreationTimeAfter", "CreationTime", float.__gt__),
                                 ("CreationTimeBefore", "CreationTime", float.__lt__),
                                 ("LastModifiedTimeAfter", "LastModifiedTime", float.__gt__),
                                 ("LastModifiedTimeBefore", "LastModifiedTime", float.__lt__)):
            if key in body:
                limit = _time(body[key], key)
                rows = [r for r in rows if test(float(r[field]), limit)]
        if body.get("NameContains"):
            rows = [r for r in rows if str(body["NameContains"]).lower() in r["TrainingJobName"].lower()]
        if "StatusEquals" in body:
            if body["StatusEquals"] not in _STATUSES:
                raise ApiError("ValidationException", f"StatusEquals: {body['StatusEquals']!r} is not one of "
                                                      f"{', '.join(_STATUSES)}")
            rows = [r for r in rows if r["TrainingJobStatus"] == body["StatusEquals"]]
        sort_by = body.get("SortBy", "CreationTime")
        keys = {"Name": "TrainingJobName", "CreationTime": "CreationTime", "Status": "TrainingJobStatus"}
        if sort_by not in keys or body.get("SortOrder", "Descending") not in ("Ascending", "Descending"):
            raise ApiError("ValidationException", "SortBy must be Name, CreationTime or Status; SortOrder "
                                                  "Ascending or Descending")
        rows.sort(key=lambda r: r[keys[sort_by]], reverse=body.get("SortOrder", "Descending") == "Descending")
        start = 0
        if body.get("NextToken"):
            try:
                start = int(body["NextToken"])
            except (TypeError, ValueError):
                raise ApiError("ValidationException", "NextToken: not a token this server gave") from None
        size = body.get("MaxResults", 10)
        if not isinstance(size, int) or not 1 <= size <= 100:
            raise ApiError("ValidationException", "MaxResults: must be 1-100")
        out: dict[str, Any] = {"TrainingJobSummaries": rows[start:start + size]}
        if start + size < len(rows):
            out["NextToken"] = str(start + size)
        return out

    def op_ListTags(self, body: Mapping[str, Any]) -> dict[str, Any]:
        arn = body.get("ResourceArn")
        for job in list(self.jobs.values()):
            if job.arn == arn:
                return {"Tags": list(job.request.get("Tags") or [])}
        raise ApiError("ValidationException", f"ResourceArn: {arn!r} is not a training job of this server")
