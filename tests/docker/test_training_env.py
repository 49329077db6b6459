"""`sdlocal run --runtime docker`: the AWS-examples-style script of tests/launcher/_smjob.py in the
training container sees SageMaker's real /opt/ml paths (channels mounted read-only at
/opt/ml/input/data/<channel>, the SDK's sourcedir.tar.gz unpacked at /opt/ml/code), and its model
is published as model.tar.gz, as on the process runtime."""
from __future__ import annotations

import io
import json
import tarfile
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.launcher._smjob import SCRIPT_DIR, check_published, make_job, sdlocal

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def leftovers(client: Any, job: str) -> list[str]:
    label = {"label": f"sdlocal.job={job}"}
    return [c.name for c in client.containers.list(all=True, filters=label)] + \
        [n.name for n in client.networks.list(filters=label)]


def test_script_sees_opt_ml_in_the_container(docker_client: Any, sdlocal_images: Any, moto_server: str,
                                             s3_client: Any, bucket: str, tmp_path: Path) -> None:
    job = f"dk-smenv-{uuid.uuid4().hex[:6]}"
    result = sdlocal(["run", str(make_job(tmp_path, s3_client, bucket, job))], tmp_path, moto_server, runtime="docker")
    assert result.returncode == 0, result.stderr
    assert "Runtime: docker" in result.stderr
    seen = check_published(s3_client, bucket, job, "/opt/ml", num_gpus=0)  # no GPU is given to the container
    assert seen["cwd"] == "/opt/ml/code" and seen["env"]["SM_MODULE_DIR"] == "/opt/ml/code"
    assert seen["env"]["SM_CHANNEL_TEST"] == "/opt/ml/input/data/test"
    assert (tmp_path / "jobs" / job / "output" / "success").exists()
    assert leftovers(docker_client, job) == []


def test_sdk_sourcedir_unpacked_at_opt_ml_code(docker_client: Any, sdlocal_images: Any, moto_server: str,
                                               s3_client: Any, bucket: str, tmp_path: Path) -> None:
    job = f"dk-smsdk-{uuid.uuid4().hex[:6]}"
    uri = f"s3://{bucket}/{job}/source/sourcedir.tar.gz"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(SCRIPT_DIR / "train.py", arcname="train.py")
    s3_client.put_object(Bucket=bucket, Key=f"{job}/source/sourcedir.tar.gz", Body=buf.getvalue())
    spec = make_job(tmp_path, s3_client, bucket, job, DebugHookConfig={"S3OutputPath": f"s3://{bucket}/"},
                    HyperParameters={"epochs": "2", "lr": "0.1", "sagemaker_program": '"train.py"',
                                     "sagemaker_submit_directory": json.dumps(uri)})
    request = yaml.safe_load(spec.read_text())
    del request["EntryPoint"], request["SourceDir"]
    spec.write_text(yaml.safe_dump(request))
    result = sdlocal(["run", str(spec)], tmp_path, moto_server, runtime="docker")
    assert result.returncode == 0, result.stderr
    seen = check_published(s3_client, bucket, job, "/opt/ml", num_gpus=0)
    assert seen["cwd"] == "/opt/ml/code" and seen["env"]["SM_MODULE_DIR"] == uri
    s3_client.head_object(Bucket=bucket, Key=f"{job}/source/sourcedir.tar.gz")
    assert leftovers(docker_client, job) == []
