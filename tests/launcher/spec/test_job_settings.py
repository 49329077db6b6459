"""StoppingCondition and the network settings of a request: the service's limits, one line naming
the field for a bad value; a job asking for network isolation is refused by the process runtime
before anything starts."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sdlocal.launcher.errors import JobError, SpecError
from sdlocal.launcher.spec.model import JobSpec
from sdlocal.launcher.spec.parse import spec_from_request


def parse(tmp_path: Path, **fields: Any) -> JobSpec:
    (tmp_path / "train.py").write_text("")
    return spec_from_request({"EntryPoint": "train.py", **fields}, base_dir=tmp_path, check_rule_names=False)


def test_stopping_condition_defaults_and_values(tmp_path: Path) -> None:
    spec = parse(tmp_path)
    assert spec.stopping.max_runtime_s == 86400 and spec.stopping.max_wait_s is None  # SageMaker's one day
    spec = parse(tmp_path, StoppingCondition={"MaxRuntimeInSeconds": 30, "MaxWaitTimeInSeconds": 60,
                                              "MaxPendingTimeInSeconds": 7200})
    assert (spec.stopping.max_runtime_s, spec.stopping.max_wait_s, spec.stopping.max_pending_s) == (30, 60, 7200)
    assert "StoppingCondition" not in spec.ignored_fields


@pytest.mark.parametrize(("value", "message"), [
    ({"MaxRuntimeInSeconds": 0}, "StoppingCondition.MaxRuntimeInSeconds: must be between 1 and 2419200 seconds, got 0"),
    ({"MaxRuntimeInSeconds": -5}, "StoppingCondition.MaxRuntimeInSeconds: must be between 1 and 2419200 seconds"),
    ({"MaxRuntimeInSeconds": 29 * 86400}, "StoppingCondition.MaxRuntimeInSeconds: must be between 1 and 2419200"),
    ({"MaxRuntimeInSeconds": "60"}, "StoppingCondition.MaxRuntimeInSeconds: must be an integer number of seconds"),
    ({"MaxRuntimeInSeconds": True}, "StoppingCondition.MaxRuntimeInSeconds: must be an integer number of seconds"),
    ({"MaxRuntimeInSeconds": 60, "MaxWaitTimeInSeconds": 30},
     "StoppingCondition.MaxWaitTimeInSeconds: must be equal to or greater than MaxRuntimeInSeconds (60), got 30"),
    ({"MaxPendingTimeInSeconds": 60}, "StoppingCondition.MaxPendingTimeInSeconds: must be between 7200 and 2419200"),
    ({"MaxRunTime": 60}, "StoppingCondition.MaxRunTime: unknown field"),
    ([60], "StoppingCondition: must be a map, got list"),
])
def test_stopping_condition_bad_values_are_one_line(tmp_path: Path, value: Any, message: str) -> None:
    with pytest.raises(SpecError) as err:
        parse(tmp_path, StoppingCondition=value)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_network_settings(tmp_path: Path) -> None:
    spec = parse(tmp_path, EnableNetworkIsolation=True, EnableInterContainerTrafficEncryption=True)
    assert spec.containers.network_isolation and spec.containers.traffic_encryption
    assert not {"EnableNetworkIsolation", "EnableInterContainerTrafficEncryption"} & set(spec.ignored_fields)
    with pytest.raises(SpecError, match="^EnableNetworkIsolation: must be true or false, got 'yes'$"):
        parse(tmp_path, EnableNetworkIsolation="yes")


def test_the_process_runtime_refuses_network_isolation_before_anything_starts(tmp_path: Path) -> None:
    from sdlocal.launcher.job.run import run_job
    from sdlocal.launcher.jobdir.folder import JobDir
    from sdlocal.launcher.runtime import ProcessRuntime
    from sdlocal.launcher.s3.endpoint import S3Endpoint

    class NoS3:
        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"S3 was used ({name}) for a job that is refused")

    spec = parse(tmp_path, EnableNetworkIsolation=True)
    with pytest.raises(JobError, match="^EnableNetworkIsolation: a training process of this host cannot be cut off"):
        run_job(spec, job_dir=JobDir(tmp_path / "job"), endpoint=S3Endpoint("http://127.0.0.1:9", "flag"),
                runtime=ProcessRuntime(), echo=lambda _: None, client=NoS3())
    assert not (tmp_path / "job").exists()


HANGS = '''import os, signal, sys, time
open(os.path.join(os.environ["PIDS_DIR"], "training"), "w").write(str(os.getpid()))

def save_and_leave(signum, frame):  # SageMaker's SIGTERM window: save the model, then leave
    open(os.path.join(os.environ["SM_MODEL_DIR"], "model.txt"), "w").write("saved on SIGTERM")
    sys.exit(0)

signal.signal(signal.SIGTERM, save_and_leave)
print("training, forever", flush=True)
while True:
    time.sleep(0.1)
'''


def test_max_runtime_stops_a_hanging_training_as_sagemaker_does(
        tmp_path: Path, moto_server: str, s3_client: Any, bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`sdlocal run` of a request with StoppingCondition.MaxRuntimeInSeconds: 2 whose training never
    ends: SIGTERM at 2 s (the script saves its model in the window), the job reads Stopped /
    MaxRuntimeExceeded in run's output, job.json and `summary`, the model is published, exit 0."""
    import io
    import tarfile
    import time

    from click.testing import CliRunner

    from sdlocal.launcher.cli import cli
    from tests.launcher._procs import gone

    monkeypatch.setenv("SDLOCAL_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PIDS_DIR", str(tmp_path))
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "hang.py").write_text(HANGS)
    (tmp_path / "job.json").write_text(json.dumps({
        "TrainingJobName": "hangs", "EntryPoint": "hang.py", "SourceDir": "src",
        "StoppingCondition": {"MaxRuntimeInSeconds": 2},
        "OutputDataConfig": {"S3OutputPath": f"s3://{bucket}/out"}}))
    work = tmp_path / "work"
    started = time.monotonic()
    result = CliRunner().invoke(cli, ["run", str(tmp_path / "job.json"), "--runtime", "process", "--work-dir",
                                      str(work), "--s3-endpoint-url", moto_server, "--s3-output-path",
                                      f"s3://{bucket}/out"])
    took = time.monotonic() - started
    assert result.exit_code == 0, result.output  # Stopped is not a failure (the SDK's wait() accepts it)
    assert 2.0 <= took < 60
    outcome = "Training job hangs: Stopped (MaxRuntimeExceeded: The job stopped because it exceeded the maximum " \
              "allowed runtime.)"
    assert outcome in result.stderr.splitlines()
    assert ("Training job hangs: MaxRuntimeExceeded: The job stopped because it exceeded the maximum allowed "
            "runtime. (StoppingCondition.MaxRuntimeInSeconds: 2 s) Stopping it (SIGTERM, SIGKILL after 120 s); "
            "the rules finish their evaluation") in result.stderr
    assert "FailureReason" not in result.stderr
    record = json.loads((work / "job.json").read_text())
    assert (record["TrainingJobStatus"], record["SecondaryStatus"]) == ("Stopped", "MaxRuntimeExceeded")
    assert record["StoppingCondition"]["MaxRuntimeInSeconds"] == 2 and "FailureReason" not in record
    (transition,) = record["SecondaryStatusTransitions"]
    assert transition["Status"] == "MaxRuntimeExceeded"
    assert transition["StatusMessage"] == "The job stopped because it exceeded the maximum allowed runtime."
    assert gone(int((tmp_path / "training").read_text()))
    # the model saved in the SIGTERM window is published, as SageMaker uploads it on a stop
    body = s3_client.get_object(Bucket=bucket, Key="out/hangs/output/model.tar.gz")["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body)) as tar:
        member = tar.extractfile("model.txt")
        assert member is not None and member.read() == b"saved on SIGTERM"
    summary = CliRunner().invoke(cli, ["summary", "hangs", "--work-dir", str(work), "--s3-endpoint-url", moto_server])
    assert summary.exit_code == 0, summary.output
    assert summary.stderr.splitlines() == [outcome]
