"""A job folder for the XGBoost algorithm laid out by the launcher's own functions (JobSpec from a
CreateTrainingJob request, platform.write_configs, _staging.stage_channels, the TrainingLaunch's
environment), and the runner started on it in a subprocess, as the process runtime starts training.

Data: an abalone-like table (the xgboost_builtin_rules notebook's data set, made up here: sex coded
1/2/3, seven sizes and weights, rings to predict), written as csv, libsvm or parquet."""
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sdlocal.launcher.job.staging import stage_channels
from sdlocal.launcher.jobdir.configs import write_configs
from sdlocal.launcher.jobdir.folder import JobDir
from sdlocal.launcher.jobdir.training_env import training_environment
from sdlocal.launcher.runtime import TrainingLaunch
from sdlocal.launcher.spec.parse import spec_from_request

REPO = Path(__file__).resolve().parents[2]
IMAGE = "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-xgboost:1.7-1"


def abalone(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(features, rings): sex, length, diameter, height, whole/shucked/viscera/shell weight."""
    rng = np.random.default_rng(seed)
    sex = rng.integers(1, 4, n).astype(float)
    length = rng.uniform(0.1, 0.8, n)
    diameter = length * rng.uniform(0.75, 0.85, n)
    height = length * rng.uniform(0.3, 0.4, n)
    whole = 0.7 * length ** 3 * 10 * rng.uniform(0.8, 1.2, n)
    shucked, viscera, shell = whole * 0.43, whole * 0.22, whole * rng.uniform(0.25, 0.35, n)
    rings = np.round(3 + 18 * shell + 2 * (sex == 3) * -1 + rng.normal(0, 1.2, n)).clip(1, 29)
    return np.column_stack([sex, length, diameter, height, whole, shucked, viscera, shell]), rings


def write_csv(path: Path, x: np.ndarray, y: np.ndarray, header: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [",".join(["rings", "sex", "length", "diameter", "height", "whole", "shucked", "viscera", "shell"])] \
        if header else []
    lines += [",".join(f"{v:.6g}" for v in (label, *row)) for label, row in zip(y, x, strict=True)]
    path.write_text("\n".join(lines) + "\n")


def write_libsvm(path: Path, x: np.ndarray, y: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{label:g} " + " ".join(f"{j}:{v:.6g}" for j, v in enumerate(row) if v != 0) + "\n"
                            for label, row in zip(y, x, strict=True)))


def write_parquet(path: Path, x: np.ndarray, y: np.ndarray) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    columns = {"label": y, **{f"x{j}": x[:, j] for j in range(x.shape[1])}}
    pq.write_table(pa.table(columns), str(path))


def channel(name: str, folder: Path, content_type: str | None, mode: str = "File") -> dict[str, Any]:
    entry: dict[str, Any] = {"ChannelName": name, "InputMode": mode,
                             "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": folder.as_uri()}}}
    if content_type is not None:
        entry["ContentType"] = content_type
    return entry


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str
    job: JobDir

    @property
    def model(self) -> Path:
        return self.job.model / "xgboost-model"

    @property
    def failure(self) -> str:
        return self.job.failure_file.read_text() if self.job.failure_file.exists() else ""


def run_algorithm(tmp: Path, hyperparameters: dict[str, str], channels: list[dict[str, Any]], *,
                  version: str = "1.7-1", debug_hook: dict[str, Any] | None = None,
                  rules: list[dict[str, Any]] | None = None, timeout: float = 300,
                  edit: Callable[[JobDir], None] | None = None) -> Run:
    """Lay out the job folder as `sdlocal run` does and run the algorithm in it; `edit` changes the
    job folder before the run (what the launcher itself would refuse to write)."""
    (tmp / "code").mkdir(parents=True, exist_ok=True)
    # an entry point keeps the spec in script mode: the launcher would refuse the bad requests these tests
    # give the runner itself (CreateTrainingJob checks an algorithm request: launcher/spec/algorithm.py)
    (tmp / "code" / "train.py").write_text("")
    request: dict[str, Any] = {
        "TrainingJobName": "xgboost-algorithm", "EntryPoint": "train.py", "SourceDir": str(tmp / "code"),
        "AlgorithmSpecification": {"TrainingImage": IMAGE.replace("1.7-1", version), "TrainingInputMode": "File"},
        "HyperParameters": hyperparameters, "InputDataConfig": channels,
    }
    if debug_hook is not None:
        request["DebugHookConfig"] = {"S3OutputPath": "s3://bucket/jobs", **debug_hook}
    if rules:
        request["DebugRuleConfigurations"] = rules
    spec = spec_from_request(request, base_dir=tmp)
    job = JobDir(tmp / "job")
    write_configs(spec, job)
    data_inputs = stage_channels(None, spec.channels, job.input_data, echo=lambda _line: None)
    if edit is not None:
        edit(job)
    launch = TrainingLaunch(
        job_name=spec.job_name, entry_point=spec.entry_point, source_dir=spec.source_dir, hyperparameters=(),
        config_dir=job.config_dir, model_dir=job.model, log_path=job.logs / "training.log",
        training_env=training_environment(spec), data_inputs=data_inputs)
    env = {**os.environ, **launch.container_env(num_gpus=0), "PYTHONPATH": str(REPO),
           "TENSORBOARD_CONFIG_FILE_PATH": str(tmp / "no-tensorboard.json")}
    proc = subprocess.run([sys.executable, "-m", "sdlocal.hook.algorithms.xgboost", "--version", version],
                          cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout)
    return Run(proc.returncode, proc.stdout, proc.stderr, job)
