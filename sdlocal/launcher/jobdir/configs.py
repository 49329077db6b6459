"""What the platform writes into a job's folder before the training starts: the container's
`/opt/ml/input/config/*.json` files (the job record, `job.json`, is launcher/job/record.py's)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sdlocal.launcher.jobdir.folder import JobDir
from sdlocal.launcher.jobdir.training_env import training_environment
from sdlocal.launcher.spec.model import JobSpec


def write_configs(spec: JobSpec, job_dir: JobDir) -> None:
    """The job folder made, with each host's config files."""
    job_dir.create()
    for host in spec.hosts:  # each host's /opt/ml/input/config (algo-1's: the job folder's)
        write_host_configs(spec, job_dir.create_host(host), host)


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
    env = training_environment(spec, host)
    _dump(host_dir.config_file("resourceconfig"), env.resource_config())
    _dump(host_dir.config_file("inputdataconfig"), env.input_data_config())
    _dump(host_dir.config_file("hyperparameters"), dict(spec.request_hyperparameters))  # as sent, as SageMaker does
