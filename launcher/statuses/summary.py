"""`rule_job_summary()`: the rules' statuses read from S3 (Debugger rules, then profiler rules),
and their table. A rule with no status yet is reported `InProgress`, except a profiler rule that
its run started no evaluator for (the job record's `Evaluated`): it is left out."""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sdlocal.launcher.errors import JobError
from sdlocal.trial.storage import Storage, open_storage

COLUMNS = ("RuleConfigurationName", "RuleEvaluationStatus", "StatusDetails")
STATUS_FILE = "status.json"


@dataclass(frozen=True)
class RuleRef:
    name: str
    output: str  # s3://.../<job>/rule-output/<name>
    kind: str = "debugger"
    evaluated: bool = True  # False: no evaluator was started for it (a profiler rule not supported yet)


def read_status(rule_output: Storage) -> dict[str, Any] | None:
    """The rule's status.json as stored (None when there is none yet)."""
    try:
        body = rule_output.read(STATUS_FILE)
    except FileNotFoundError:
        return None
    try:
        data = json.loads(body)
    except ValueError as e:  # also not UTF-8
        raise JobError(f"{rule_output.uri}/{STATUS_FILE}: corrupt rule status: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("RuleEvaluationStatus"), str):
        raise JobError(f"{rule_output.uri}/{STATUS_FILE}: corrupt rule status: no RuleEvaluationStatus")
    return data


def rule_job_summary(client: Any, rules: Iterable[RuleRef]) -> list[dict[str, Any]]:
    ordered = sorted(rules, key=lambda r: r.kind != "debugger")  # stable: Debugger rules first
    out = []
    for rule in ordered:
        status = read_status(open_storage(rule.output, client=client))
        if status is None:
            if not rule.evaluated:
                continue
            status = {"RuleConfigurationName": rule.name, "RuleEvaluationStatus": "InProgress", "StatusDetails": ""}
        out.append(status)
    return out


ACCOUNT = "123456789012"  # moto's default account: the ARNs the SDK sees from `sdlocal serve`


def rule_job_arn(region: str, job_name: str, rule_name: str) -> str:
    """The rule's evaluation (a processing job on SageMaker): `<job>-<rule>-<hash>`, <= 63 characters."""
    rule = re.sub(r"[^a-z0-9]+", "-", rule_name.lower()).strip("-") or "rule"
    digest = hashlib.sha1(f"{job_name}/{rule_name}".encode()).hexdigest()[:8]
    return f"arn:aws:sagemaker:{region}:{ACCOUNT}:processing-job/{job_name[:26].lower()}-{rule[:26]}-{digest}"


API_FIELDS = ("RuleConfigurationName", "RuleEvaluationJobArn", "RuleEvaluationStatus", "StatusDetails",
              "LastModifiedTime")


def _epoch(value: Any, default: float) -> float:
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return default
    return default


def api_rule_status(row: dict[str, Any], job_arn: str, default_time: float) -> dict[str, Any]:
    """A status row in DescribeTrainingJob's RuleEvaluationStatus shape: its five fields and no
    other (sdlocal's LastEvaluatedStep dropped), StatusDetails left out when empty as the service
    does, LastModifiedTime in epoch seconds (the wire's form; boto3 gives a datetime)."""
    out: dict[str, Any] = {"RuleConfigurationName": row["RuleConfigurationName"],
                           "RuleEvaluationJobArn": row.get("RuleEvaluationJobArn") or job_arn,
                           "RuleEvaluationStatus": row["RuleEvaluationStatus"]}
    if row.get("StatusDetails"):
        out["StatusDetails"] = row["StatusDetails"]
    out["LastModifiedTime"] = _epoch(row.get("LastModifiedTime"), default_time)
    return out


def sdk_summary(rows: Sequence[dict[str, Any]], job_name: str, region: str) -> list[dict[str, Any]]:
    """`rule_job_summary()`'s shape (the SageMaker SDK's: Debugger rules, then profiler rules), as
    JSON: LastModifiedTime as ISO 8601 where boto3 gives a datetime."""
    now = datetime.now(timezone.utc).timestamp()
    out = []
    for row in rows:
        api = api_rule_status(row, rule_job_arn(region, job_name, row["RuleConfigurationName"]), now)
        api["LastModifiedTime"] = datetime.fromtimestamp(api["LastModifiedTime"], timezone.utc).isoformat()
        out.append(api)
    return out


def rules_of_job(client: Any, job_name: str, *, output_path: str | None, job_dir: Path | None) -> list[RuleRef]:
    """The job's rules: from `--s3-output-path` (listing `rule-output/`), else the local job record
    written by `sdlocal run`, else the default output path."""
    record = job_dir / "job.json" if job_dir else None
    if output_path is None and record is not None and record.is_file():
        try:
            data = json.loads(record.read_bytes())
            return [RuleRef(str(r["RuleConfigurationName"]), str(r["RuleOutput"]), kind,
                            kind == "debugger" or r.get("Evaluated") is True)  # older records: no profiler rule ran
                    for key, kind in (("DebugRules", "debugger"), ("ProfilerRules", "profiler"))
                    for r in data.get(key, [])]
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise JobError(f"{record}: corrupt job record ({type(e).__name__}: {e}); "
                           "give --s3-output-path to read the statuses from S3") from None
    from sdlocal.launcher.spec.model import DEFAULT_S3_OUTPUT_PATH

    base = (output_path or DEFAULT_S3_OUTPUT_PATH).rstrip("/")
    job = open_storage(f"{base}/{job_name}", client=client)
    # a rule's folder holds its status, reports and requests: a few keys each
    names = sorted({key.split("/", 2)[1] for key in job.list("rule-output/", include_tmp=True) if key.count("/") >= 2})
    if not names and not job.any_key():
        raise JobError(f"no training job {job_name!r} under {base}/ (give its --s3-output-path?)")
    return [RuleRef(name, f"{job.uri}/rule-output/{name}") for name in names]


def training_outcome(job_name: str, job_dir: Path | None) -> str | None:
    """How the training ended, from the local job record (`sdlocal run` writes it): TrainingJobStatus,
    SecondaryStatus where it says more (MaxRuntimeExceeded), FailureReason; None without a record."""
    from sdlocal.launcher.job.model import describe_outcome

    try:
        record = json.loads((job_dir / "job.json").read_text()) if job_dir is not None else None
    except (OSError, ValueError):
        return None
    return describe_outcome(job_name, record) if isinstance(record, dict) else None


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    if not rows:
        return "No rule evaluation statuses."
    cells = [[str(row.get(c) or "") for c in COLUMNS] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(COLUMNS[:-1])]
    lines = []
    for r in [list(COLUMNS), *cells]:
        lines.append("  ".join(v.ljust(w) for v, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1])
    return "\n".join(line.rstrip() for line in lines)
