"""`rule_job_summary()`: the rules' statuses read from S3 (Debugger rules, then profiler rules),
and their table. A rule with no status yet is reported `InProgress` (Debugger rules only: this
version does not evaluate profiler rules, so those without a status are left out)."""
from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher._values import split_s3_uri
from launcher.errors import JobError

COLUMNS = ("RuleConfigurationName", "RuleEvaluationStatus", "StatusDetails")
STATUS_FILE = "status.json"


@dataclass(frozen=True)
class RuleRef:
    name: str
    output: str  # s3://.../<job>/rule-output/<name>
    kind: str = "debugger"


def read_status(client: Any, rule_output: str) -> dict[str, Any] | None:
    bucket, prefix = split_s3_uri(rule_output)
    try:
        body = client.get_object(Bucket=bucket, Key=f"{prefix}/{STATUS_FILE}")["Body"].read()
    except client.exceptions.NoSuchKey:
        return None
    data = json.loads(body)
    return data if isinstance(data, dict) else None


def rule_job_summary(client: Any, rules: Iterable[RuleRef]) -> list[dict[str, Any]]:
    ordered = sorted(rules, key=lambda r: r.kind != "debugger")  # stable: Debugger rules first
    out = []
    for rule in ordered:
        status = read_status(client, rule.output)
        if status is None:
            if rule.kind != "debugger":
                continue
            status = {"RuleConfigurationName": rule.name, "RuleEvaluationStatus": "InProgress", "StatusDetails": ""}
        out.append(status)
    return out


def rules_of_job(client: Any, job_name: str, *, output_path: str | None, job_dir: Path | None) -> list[RuleRef]:
    """The job's rules: from `--s3-output-path` (listing `rule-output/`), else the local job record
    written by `sdlocal run`, else the default output path."""
    record = job_dir / "job.json" if job_dir else None
    if output_path is None and record is not None and record.is_file():
        data = json.loads(record.read_text())
        return [RuleRef(r["RuleConfigurationName"], r["RuleOutput"], kind)
                for key, kind in (("DebugRules", "debugger"), ("ProfilerRules", "profiler"))
                for r in data.get(key, [])]
    from launcher.spec import DEFAULT_S3_OUTPUT_PATH

    base = (output_path or DEFAULT_S3_OUTPUT_PATH).rstrip("/")
    bucket, prefix = split_s3_uri(f"{base}/{job_name}/rule-output")
    names = []
    paginator = client.get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=bucket, Prefix=f"{prefix}/", Delimiter="/"):
        names += [p["Prefix"][len(prefix) + 1:].rstrip("/") for p in page.get("CommonPrefixes", [])]
    job_prefix = prefix.rsplit("/", 1)[0]
    if not names and not client.list_objects_v2(Bucket=bucket, Prefix=f"{job_prefix}/", MaxKeys=1).get("KeyCount"):
        raise JobError(f"no training job {job_name!r} under {base}/ (give its --s3-output-path?)")
    return [RuleRef(name, f"s3://{bucket}/{prefix}/{name}") for name in sorted(names)]


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    if not rows:
        return "No rule evaluation statuses."
    cells = [[str(row.get(c) or "") for c in COLUMNS] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(COLUMNS[:-1])]
    lines = []
    for r in [list(COLUMNS), *cells]:
        lines.append("  ".join(v.ljust(w) for v, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1])
    return "\n".join(line.rstrip() for line in lines)
