"""`rule_job_summary()`: the rules' statuses read from S3 (Debugger rules, then profiler rules),
and their table. A rule with no status yet is reported `InProgress`, except a profiler rule that
its run started no evaluator for (the job record's `Evaluated`): it is left out. Statuses are
read here; the job record (launcher/job/record.py) is the CLI's to read and hand over."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from sdlocal.evaluator.errors import CorruptStatusError
from sdlocal.evaluator.rule import RuleKind
from sdlocal.evaluator.status import read_status, rule_job_arn
from sdlocal.launcher.errors import JobError
from sdlocal.trial.storage import Storage

COLUMNS = ("RuleConfigurationName", "RuleEvaluationStatus", "StatusDetails")


@dataclass(frozen=True)
class RuleRef:
    name: str
    output: str  # s3://.../<job>/rule-output/<name>
    kind: RuleKind = RuleKind.DEBUGGER
    evaluated: bool = True  # False: no evaluator was started for it (a profiler rule not supported yet)


def rule_job_summary(rules: Iterable[RuleRef], open_output: Callable[[str], Storage]) -> list[dict[str, Any]]:
    """The statuses of `rules`, Debugger rules first, each read by evaluator.status.read_status from
    the storage `open_output(rule.output)` gives (a job's status keepers while it runs; a storage
    with the retry policy otherwise). A rule with no status yet is InProgress."""
    out = []
    for rule in sorted(rules, key=lambda r: r.kind != RuleKind.DEBUGGER):  # stable: Debugger rules first
        try:
            status = read_status(open_output(rule.output))
        except CorruptStatusError as e:
            raise JobError(str(e)) from None
        if status is None:
            if not rule.evaluated:
                continue
            out.append({"RuleConfigurationName": rule.name, "RuleEvaluationStatus": "InProgress", "StatusDetails": ""})
        else:
            out.append(status.to_dict())
    return out


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


def api_rule_status(row: dict[str, Any], job_name: str, default_time: float, region: str | None = None) -> dict[str, Any]:
    """A status row in DescribeTrainingJob's RuleEvaluationStatus shape: its five fields and no
    other (sdlocal's LastEvaluatedStep dropped), StatusDetails left out when empty as the service
    does, LastModifiedTime in epoch seconds (the wire's form; boto3 gives a datetime)."""
    name = row["RuleConfigurationName"]
    out: dict[str, Any] = {"RuleConfigurationName": name,
                           "RuleEvaluationJobArn": row.get("RuleEvaluationJobArn") or rule_job_arn(job_name, name, region),
                           "RuleEvaluationStatus": row["RuleEvaluationStatus"]}
    if row.get("StatusDetails"):
        out["StatusDetails"] = row["StatusDetails"]
    out["LastModifiedTime"] = _epoch(row.get("LastModifiedTime"), default_time)
    return out


def sdk_summary(rows: Sequence[dict[str, Any]], job_name: str, region: str | None = None) -> list[dict[str, Any]]:
    """`rule_job_summary()`'s shape (the SageMaker SDK's: Debugger rules, then profiler rules), as
    JSON: LastModifiedTime as ISO 8601 where boto3 gives a datetime."""
    now = datetime.now(timezone.utc).timestamp()
    out = []
    for row in rows:
        api = api_rule_status(row, job_name, now, region)
        api["LastModifiedTime"] = datetime.fromtimestamp(api["LastModifiedTime"], timezone.utc).isoformat()
        out.append(api)
    return out


def rules_of_job(open_job: Callable[[str], Storage], job_name: str, *, output_path: str | None,
                 recorded: Sequence[RuleRef] | None = None) -> list[RuleRef]:
    """The job's rules: from `--s3-output-path` (listing `rule-output/`), else those of the local
    job record (`recorded`: what launcher/job/record.py read), else the default output path."""
    if output_path is None and recorded is not None:
        return list(recorded)
    from sdlocal.launcher.spec.model import DEFAULT_S3_OUTPUT_PATH

    base = (output_path or DEFAULT_S3_OUTPUT_PATH).rstrip("/")
    job = open_job(f"{base}/{job_name}")
    # a rule's folder holds its status, reports and requests: a few keys each
    names = sorted({key.split("/", 2)[1] for key in job.list("rule-output/", include_tmp=True) if key.count("/") >= 2})
    if not names and not job.any_key():
        raise JobError(f"no training job {job_name!r} under {base}/ (give its --s3-output-path?)")
    return [RuleRef(name, f"{job.uri}/rule-output/{name}") for name in names]


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    if not rows:
        return "No rule evaluation statuses."
    cells = [[str(row.get(c) or "") for c in COLUMNS] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(COLUMNS[:-1])]
    lines = []
    for r in [list(COLUMNS), *cells]:
        lines.append("  ".join(v.ljust(w) for v, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1])
    return "\n".join(line.rstrip() for line in lines)
