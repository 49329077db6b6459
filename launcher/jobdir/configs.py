"""What the platform writes into a job's folder before the training starts: the container's
`/opt/ml/input/config/*.json` files and `job.json`, the job record (what `sdlocal summary` reads
later and what the job's outcome is added to)."""
from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path
from typing import Any

from sdlocal.launcher.jobdir.folder import JobDir
from sdlocal.launcher.spec.model import JobSpec


def write_configs(spec: JobSpec, job_dir: JobDir, endpoint_url: str | None,
                  unevaluated: Collection[str] = (), endpoint_source: str | None = None) -> None:
    """The container's config files, plus `job.json` (what `sdlocal summary` needs later).
    `unevaluated`: the profiler rules this run starts no evaluator for; `endpoint_url` and
    `endpoint_source` (S3Endpoint's): where `summary` finds the job's statuses again."""
    job_dir.create()
    for host in spec.hosts:  # each host's /opt/ml/input/config (algo-1's: the job folder's)
        write_host_configs(spec, job_dir.create_host(host), host)
    _dump(job_dir.record, job_record(spec, endpoint_url, unevaluated, endpoint_source))


def _dump(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n")


def write_host_configs(spec: JobSpec, host_dir: JobDir, host: str) -> None:
    """`host`'s input/config/*.json, its local paths those of `host_dir` (its /opt/ml)."""
    if spec.hook is not None:
        _dump(host_dir.config_file("debughookconfig"), spec.hook.to_container_config(str(host_dir.tensors)))
    if spec.profiler is not None:
        _dump(host_dir.config_file("profilerconfig"), spec.profiler.to_container_config(str(host_dir.profiler)))
    if spec.tensorboard is not None:
        _dump(host_dir.config_file("tensorboardoutputconfig"), {"LocalPath": str(host_dir.tensorboard)})
    env = spec.training_environment(host)
    _dump(host_dir.config_file("resourceconfig"), env.resource_config())
    _dump(host_dir.config_file("inputdataconfig"), env.input_data_config())
    _dump(host_dir.config_file("hyperparameters"), dict(spec.request_hyperparameters))  # as sent, as SageMaker does


def update_record(job_dir: JobDir, **fields: Any) -> None:
    """Add the job's outcome to `job.json` (fields whose value is None are left out)."""
    try:
        record = json.loads(job_dir.record.read_text())
    except (OSError, ValueError):
        record = {}
    record.update({k: v for k, v in fields.items() if v is not None})
    job_dir.record.write_text(json.dumps(record, indent=2) + "\n")


def job_record(spec: JobSpec, endpoint_url: str | None, unevaluated: Collection[str] = (),
               endpoint_source: str | None = None) -> dict[str, Any]:
    """`Evaluated` says whether a profiler rule got an evaluator (records written before profiler
    rules were evaluated lack it: none did); `summary` leaves out those that did not."""
    return {
        "TrainingJobName": spec.job_name,
        "DebugOutput": spec.debug_output,
        "S3EndpointUrl": endpoint_url,
        "S3EndpointSource": endpoint_source,
        "DebugRules": [{"RuleConfigurationName": r.name, "RuleOutput": r.output} for r in spec.debug_rules],
        "ProfilerRules": [{"RuleConfigurationName": r.name, "RuleOutput": r.output, "Evaluated": r.name not in unevaluated}
                          for r in spec.profiler_rules],
    }
