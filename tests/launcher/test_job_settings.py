"""StoppingCondition and the network settings of a request: the service's limits, one line naming
the field for a bad value; a job asking for network isolation is refused by the process runtime
before anything starts."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from launcher.errors import JobError, SpecError
from launcher.spec import JobSpec


def parse(tmp_path: Path, **fields: Any) -> JobSpec:
    (tmp_path / "train.py").write_text("")
    return JobSpec.from_request({"EntryPoint": "train.py", **fields}, base_dir=tmp_path, check_rule_names=False)


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
    from launcher.job import run_job
    from launcher.platform import JobDir
    from launcher.runtime import ProcessRuntime
    from launcher.s3 import S3Endpoint

    class NoS3:
        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"S3 was used ({name}) for a job that is refused")

    spec = parse(tmp_path, EnableNetworkIsolation=True)
    with pytest.raises(JobError, match="^EnableNetworkIsolation: a training process of this host cannot be cut off"):
        run_job(spec, job_dir=JobDir(tmp_path / "job"), endpoint=S3Endpoint("http://127.0.0.1:9", "flag"),
                runtime=ProcessRuntime(), echo=lambda _: None, client=NoS3())
    assert not (tmp_path / "job").exists()
