"""End to end on the process runtime: `sdlocal run` (a subprocess) of a script written as the AWS
examples write them, against a real moto server: SM_* variables, an S3 and a local channel, the
request's Environment, model.tar.gz/output.tar.gz where SageMaker puts them, the SDK's
sourcedir.tar.gz fetched (and never counted as an earlier job, nor deleted by --overwrite), a
failed training's FailureReason; bad inputs are one line each (in-process CLI)."""
from __future__ import annotations

import io
import json
import tarfile
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from sdlocal.launcher.cli import cli
from sdlocal.launcher.jobdir.training_env import count_gpus
from tests.launcher._smjob import SCRIPT_DIR, check_published, make_job, sdlocal

FINAL = {"IssuesFound", "NoIssuesFound"}


def sourcedir_tarball() -> bytes:
    """What the SageMaker SDK uploads: the source folder's files at the archive's root."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(SCRIPT_DIR / "train.py", arcname="train.py")
    return buf.getvalue()


@pytest.mark.slow
def test_aws_style_script_sees_sagemakers_training_environment(tmp_path: Path, moto_server: str, s3_client: Any,
                                                               bucket: str) -> None:
    job = f"smenv-{uuid.uuid4().hex[:6]}"
    result = sdlocal(["run", str(make_job(tmp_path, s3_client, bucket, job))], tmp_path, moto_server)
    assert result.returncode == 0, result.stderr
    assert f"Model artifacts: s3://{bucket}/models/{job}/output/model.tar.gz" in result.stderr
    assert "Channel training: 2 file(s)" in result.stderr
    job_dir = tmp_path / "jobs" / job
    seen = check_published(s3_client, bucket, job, str(job_dir), count_gpus())
    assert seen["cwd"] == str(SCRIPT_DIR)
    assert json.loads(seen["env"]["SM_TRAINING_ENV"])["module_dir"] == str(SCRIPT_DIR)
    assert (job_dir / "input" / "data" / "test").is_symlink()  # local data is linked, not copied
    assert (job_dir / "output" / "success").exists()
    record = json.loads((job_dir / "job.json").read_text())
    assert record["TrainingJobStatus"] == "Completed"
    assert record["ModelArtifacts"] == {"S3ModelArtifacts": f"s3://{bucket}/models/{job}/output/model.tar.gz"}
    assert {s["RuleEvaluationStatus"] for s in json.loads(result.stdout)} <= FINAL  # the hook ran too
    s3_client.head_object(Bucket=bucket, Key=f"debug/{job}/debug-output/training_job_end.ts")


@pytest.mark.slow
def test_sdk_sourcedir_tarball_fetched_and_never_deleted(tmp_path: Path, moto_server: str, s3_client: Any,
                                                         bucket: str) -> None:
    job = f"smsdk-{uuid.uuid4().hex[:6]}"
    uri = f"s3://{bucket}/{job}/source/sourcedir.tar.gz"  # the SDK's upload, under the job's own prefix
    s3_client.put_object(Bucket=bucket, Key=f"{job}/source/sourcedir.tar.gz", Body=sourcedir_tarball())
    spec = make_job(tmp_path, s3_client, bucket, job, DebugHookConfig={"S3OutputPath": f"s3://{bucket}/"},
                    HyperParameters={"epochs": "2", "lr": "0.1", "sagemaker_program": '"train.py"',
                                     "sagemaker_submit_directory": json.dumps(uri)})
    request = yaml.safe_load(spec.read_text())
    del request["EntryPoint"], request["SourceDir"]
    spec.write_text(yaml.safe_dump(request))
    result = sdlocal(["run", str(spec)], tmp_path, moto_server)
    assert result.returncode == 0, result.stderr  # the upload alone is not an earlier job
    job_dir = tmp_path / "jobs" / job
    assert f"Source: {uri} unpacked into {job_dir / 'code'}" in result.stderr
    seen = check_published(s3_client, bucket, job, str(job_dir), count_gpus())
    assert seen["cwd"] == str(job_dir / "code") and seen["env"]["SM_MODULE_DIR"] == uri  # as the toolkit says
    again = sdlocal(["run", str(spec)], tmp_path, moto_server, timeout=60)
    assert again.returncode == 1 and f"Error: Training job {job} already exists" in again.stderr
    again = sdlocal(["run", str(spec), "--overwrite"], tmp_path, moto_server)
    assert again.returncode == 0, again.stderr
    s3_client.head_object(Bucket=bucket, Key=f"{job}/source/sourcedir.tar.gz")  # --overwrite kept the upload
    s3_client.head_object(Bucket=bucket, Key=f"{job}/debug-output/training_job_end.ts")


@pytest.mark.slow
def test_failed_training_gets_a_failure_reason(tmp_path: Path, moto_server: str, s3_client: Any, bucket: str) -> None:
    job = f"smfail-{uuid.uuid4().hex[:6]}"
    spec = make_job(tmp_path, s3_client, bucket, job, HyperParameters={"epochs": "1", "fail": "1"})
    result = sdlocal(["run", str(spec)], tmp_path, moto_server)
    assert result.returncode == 1
    assert (f"Training job {job}: Failed\nFailureReason: AlgorithmError: ExecuteUserScriptError:\nExitCode 1\n"
            'ErrorMessage "ValueError: asked to fail after training (accuracy ') in result.stderr
    assert 'Command "python train.py --epochs 1 --fail 1"' in result.stderr
    failure = (tmp_path / "jobs" / job / "output" / "failure").read_text()
    assert failure.startswith("ExecuteUserScriptError:")
    assert json.loads((tmp_path / "jobs" / job / "job.json").read_text())["FailureReason"].startswith("AlgorithmError")
    listed = s3_client.list_objects_v2(Bucket=bucket, Prefix=f"models/{job}/").get("Contents", [])
    assert listed == []  # a failed training publishes no model


def run_cli(spec: Path, moto_server: str, *args: str) -> Any:
    return CliRunner().invoke(cli, ["run", str(spec), "--s3-endpoint-url", moto_server, *args])


def error_lines(result: Any) -> list[str]:
    return [line for line in result.output.splitlines() if line.startswith("Error: ")]


def test_bad_inputs_are_one_line_and_leave_no_job_behind(tmp_path: Path, moto_server: str, s3_client: Any,
                                                         bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SDLOCAL_HOME", str(tmp_path / "home"))
    job = f"smbad-{uuid.uuid4().hex[:6]}"
    jobs = tmp_path / "home" / "jobs"

    def spec_with(**fields: Any) -> Path:
        request = yaml.safe_load(make_job(tmp_path, s3_client, bucket, job).read_text())
        request.update(fields)
        for key in [k for k, v in fields.items() if v is None]:
            del request[key]
        path = tmp_path / "bad.yaml"
        path.write_text(yaml.safe_dump(request))
        return path

    missing = f"s3://{bucket}/{job}/source/sourcedir.tar.gz"
    result = run_cli(spec_with(SourceDir=missing), moto_server)
    assert result.exit_code == 1 and error_lines(result) == [f"Error: SourceDir {missing}: no such object in S3"]
    assert not (jobs / job).exists()  # nothing half-staged: the same name runs once fixed

    s3_client.put_object(Bucket=bucket, Key=f"{job}/junk.tar.gz", Body=b"not a tarball")
    result = run_cli(spec_with(SourceDir=f"s3://{bucket}/{job}/junk.tar.gz"), moto_server)
    assert error_lines(result)[0].startswith(f"Error: SourceDir s3://{bucket}/{job}/junk.tar.gz: not a readable "
                                             "gzipped tar archive")

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(SCRIPT_DIR / "train.py", arcname="other.py")
    s3_client.put_object(Bucket=bucket, Key="no-entry/sourcedir.tar.gz", Body=buf.getvalue())
    result = run_cli(spec_with(SourceDir=f"s3://{bucket}/no-entry/sourcedir.tar.gz"), moto_server)
    assert error_lines(result) == [f"Error: EntryPoint: 'train.py' is not in s3://{bucket}/no-entry/sourcedir.tar.gz "
                                   f"(unpacked into {jobs / job / 'code'})"]

    empty = {"ChannelName": "training",
             "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": f"s3://{bucket}/empty/"}}}
    result = run_cli(spec_with(InputDataConfig=[empty]), moto_server)
    assert error_lines(result) == [
        f"Error: channel training: no S3 objects found under S3 URL s3://{bucket}/empty/"]
    assert not (jobs / job).exists()

    result = run_cli(spec_with(InputDataConfig=[{**empty, "InputMode": "Pipe"}]), moto_server)
    assert result.exit_code == 1 and len(error_lines(result)) == 1
    assert error_lines(result)[0].startswith("Error: InputDataConfig[0] (training).InputMode: Pipe mode is not "
                                             "supported by sdlocal")
    result = run_cli(spec_with(Environment={"BAD-KEY": "x"}), moto_server)
    assert error_lines(result) == ["Error: Environment: key 'BAD-KEY' failed to satisfy constraint: Member must "
                                   "have length less than or equal to 512 and satisfy regular expression pattern: "
                                   "[a-zA-Z_][a-zA-Z0-9_]*"]
    result = run_cli(spec_with(), moto_server, "--channel", "test=/no/such/folder")
    assert error_lines(result) == ["Error: InputDataConfig[1] (test).DataSource.S3DataSource.S3Uri: local channel "
                                   "data /no/such/folder does not exist"]
