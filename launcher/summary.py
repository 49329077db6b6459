"""`rule_job_summary()`: the rules' statuses read from S3 (Debugger rules, then profiler rules),
and their table. A rule with no status yet is reported `InProgress`, except a profiler rule that
its run started no evaluator for (the job record's `Evaluated`): it is left out."""
from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.errors import JobError
from trial.storage import Storage, open_storage

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
    data = json.loads(body)
    return data if isinstance(data, dict) else None


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


def rules_of_job(client: Any, job_name: str, *, output_path: str | None, job_dir: Path | None) -> list[RuleRef]:
    """The job's rules: from `--s3-output-path` (listing `rule-output/`), else the local job record
    written by `sdlocal run`, else the default output path."""
    record = job_dir / "job.json" if job_dir else None
    if output_path is None and record is not None and record.is_file():
        data = json.loads(record.read_text())
        return [RuleRef(r["RuleConfigurationName"], r["RuleOutput"], kind,
                        kind == "debugger" or r.get("Evaluated") is True)  # older records: no profiler rule ran
                for key, kind in (("DebugRules", "debugger"), ("ProfilerRules", "profiler"))
                for r in data.get(key, [])]
    from launcher.spec import DEFAULT_S3_OUTPUT_PATH

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
    from launcher._job_types import describe_outcome

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
