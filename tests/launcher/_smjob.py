"""A job in the style of the AWS examples for the training-environment end-to-end tests (process
runtime here, docker runtime in tests/docker): data in an S3 channel and a local channel, the
request's Environment, a Debugger rule; helpers to read what it published."""
from __future__ import annotations

import io
import json
import os
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import yaml

from tests.helpers import run_sdlocal

REPO = Path(__file__).resolve().parents[2]
SCRIPT_DIR = Path(__file__).parent / "data" / "sm_script"


def rows(n: int, seed: int) -> str:
    """A separable two-class CSV: x0 + x1 > 0 is class 1."""
    lines = []
    for i in range(n):
        a, b = ((i * 37 + seed) % 17) / 8 - 1, ((i * 11 + seed) % 13) / 6 - 1
        lines.append(f"{a:.3f},{b:.3f},{int(a + b > 0)}")
    return "\n".join(lines) + "\n"


def make_job(tmp_path: Path, s3_client: Any, bucket: str, job: str, **extra: Any) -> Path:
    """The spec file; training data under s3://bucket/datasets/train/, test data in a local folder."""
    s3_client.put_object(Bucket=bucket, Key="datasets/train/part-0.csv", Body=rows(64, 1).encode())
    s3_client.put_object(Bucket=bucket, Key="datasets/train/more/part-1.csv", Body=rows(64, 2).encode())
    local = tmp_path / "test-data"
    local.mkdir(exist_ok=True)
    (local / "test.csv").write_text(rows(32, 3))
    request = {
        "TrainingJobName": job, "EntryPoint": "train.py", "SourceDir": str(SCRIPT_DIR),
        "HyperParameters": {"epochs": "2", "lr": "0.1"},
        "Environment": {"MY_SETTING": "from-the-request"},
        "InputDataConfig": [
            {"ChannelName": "training", "ContentType": "text/csv",
             "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": f"s3://{bucket}/datasets/train/"}}},
            {"ChannelName": "test",
             "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": f"file://{local}"}}},
        ],
        "OutputDataConfig": {"S3OutputPath": f"s3://{bucket}/models"},
        "DebugHookConfig": {"S3OutputPath": f"s3://{bucket}/debug", "HookParameters": {"save_interval": "2"}},
        "DebugRuleConfigurations": [{"RuleConfigurationName": "LossNotDecreasing",
                                     "RuleParameters": {"rule_to_invoke": "LossNotDecreasing"}}],
        **extra,
    }
    spec = tmp_path / f"{job}.yaml"
    spec.write_text(yaml.safe_dump(request))
    return spec


def sdlocal(args: list[str], home: Path, moto_server: str, runtime: str = "process",
            timeout: float = 400) -> subprocess.CompletedProcess[str]:
    return run_sdlocal(*args, "--s3-endpoint-url", moto_server, "--json", home=home, runtime=runtime,
                       timeout=timeout)


def read_tarball(s3_client: Any, bucket: str, key: str) -> dict[str, bytes]:
    body = s3_client.get_object(Bucket=bucket, Key=key)["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def check_published(s3_client: Any, bucket: str, job: str, opt_ml: str, num_gpus: int) -> dict[str, Any]:
    """model.tar.gz and output.tar.gz where SageMaker puts them; what the script saw; returns it."""
    import torch

    model = read_tarball(s3_client, bucket, f"models/{job}/output/model.tar.gz")
    assert list(model) == ["model.pth"]
    state = torch.load(io.BytesIO(model["model.pth"]), weights_only=True)
    assert state["0.weight"].shape == (8, 2)
    seen = json.loads(read_tarball(s3_client, bucket, f"models/{job}/output/output.tar.gz")["seen.json"])
    env = seen["env"]
    assert seen["hosts"] == ["algo-1"] and seen["current_host"] == "algo-1" and seen["num_gpus"] == num_gpus
    assert seen["argv"][1:] == ["--epochs", "2", "--lr", "0.1"]  # the toolkit's arguments
    assert seen["channel_files"] == {"training": ["more/part-1.csv", "part-0.csv"], "test": ["test.csv"]}
    assert seen["accuracy"] > 0.6
    assert env["MY_SETTING"] == "from-the-request" and env["TRAINING_JOB_NAME"] == job
    assert env["SM_MODEL_DIR"] == f"{opt_ml}/model" and env["SM_OUTPUT_DATA_DIR"] == f"{opt_ml}/output/data"
    assert env["SM_CHANNEL_TRAINING"] == f"{opt_ml}/input/data/training"
    assert env["SM_CHANNELS"] == '["test","training"]' and env["SM_CURRENT_HOST"] == "algo-1"
    assert json.loads(env["SM_HPS"]) == {"epochs": 2, "lr": 0.1} and env["SM_HP_LR"] == "0.1"
    assert json.loads(env["SM_USER_ARGS"]) == ["--epochs", "2", "--lr", "0.1"]
    assert json.loads(env["SM_INPUT_DATA_CONFIG"])["training"]["ContentType"] == "text/csv"
    training_env = json.loads(env["SM_TRAINING_ENV"])
    assert training_env["job_name"] == job and training_env["channel_input_dirs"]["test"] == f"{opt_ml}/input/data/test"
    assert env["SM_USER_ENTRY_POINT"] == "train.py" and env["SM_NUM_CPUS"] == str(os.cpu_count())
    return seen
