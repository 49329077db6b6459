"""The distributed job of issue 19 for the end-to-end tests (process runtime here, docker runtime in
tests/docker, the SDK against `sdlocal serve` in tests/serve): 2 hosts x 2 processes of a PyTorch
DDP script (data/ddp_script/train_ddp.py, gloo on CPU) with LossNotDecreasing, LowGPUUtilization and
ProfilerReport, and the checks of what such a job must leave behind."""
from __future__ import annotations

import io
import json
import re
import tarfile
from pathlib import Path
from typing import Any

import yaml

from tests.helpers import s3_keys

SCRIPT_DIR = Path(__file__).parent / "data" / "ddp_script"
FINAL = {"IssuesFound", "NoIssuesFound", "Error", "Stopped"}
RULES = ["LossNotDecreasing", "LowGPUUtilization", "ProfilerReport"]


def request(job: str, *, hosts: int = 2, per_host: int = 2, include_workers: str = "all",
            distribution: str = "sagemaker_torch_distributed_enabled", entry_point: str = "train_ddp.py",
            **hyperparameters: str) -> dict[str, Any]:
    return {
        "TrainingJobName": job, "EntryPoint": entry_point, "SourceDir": str(SCRIPT_DIR),
        "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": hosts, "VolumeSizeInGB": 30},
        "HyperParameters": {"epochs": "2", distribution: "true",
                            "sagemaker_mpi_num_of_processes_per_host": str(per_host), **hyperparameters},
        "DebugHookConfig": {"HookParameters": {"include_workers": include_workers, "save_interval": "1"}},
        "DebugRuleConfigurations": [{"RuleConfigurationName": "LossNotDecreasing",
                                     "RuleParameters": {"rule_to_invoke": "LossNotDecreasing"}}],
        "ProfilerConfig": {"ProfilingIntervalInMilliseconds": 500},
        "ProfilerRuleConfigurations": [
            {"RuleConfigurationName": name, "RuleParameters": {"rule_to_invoke": name}}
            for name in ("LowGPUUtilization", "ProfilerReport")],
    }


def spec_file(tmp_path: Path, job: str, **kwargs: Any) -> Path:
    path = tmp_path / f"{job}.yaml"
    path.write_text(yaml.safe_dump(request(job, **kwargs)))
    return path


def keys(s3_client: Any, bucket: str, prefix: str) -> list[str]:
    return s3_keys(s3_client, bucket, prefix, relative=True)


def tarball(s3_client: Any, bucket: str, key: str) -> dict[str, bytes]:
    body = s3_client.get_object(Bucket=bucket, Key=key)["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def check_statuses(statuses: list[dict[str, Any]]) -> dict[str, str]:
    """Every rule reached a final status; LowGPUUtilization without GPU data finds no issue."""
    got = {s["RuleConfigurationName"]: s["RuleEvaluationStatus"] for s in statuses}
    assert sorted(got) == sorted(RULES) and set(got.values()) <= FINAL, statuses
    assert got["LowGPUUtilization"] == "NoIssuesFound", statuses  # no GPU here: nothing to judge
    assert got["ProfilerReport"] == "NoIssuesFound" and got["LossNotDecreasing"] == "NoIssuesFound", statuses
    return got


def check_trial(out: str, endpoint_url: str, workers: int) -> None:
    """The job's debug-output read as smdebug reads it: every worker the hook settings ask for."""
    from sdlocal.trial import create_trial

    trial = create_trial(f"{out}/debug-output", endpoint_url=endpoint_url)
    assert trial.loaded_all_steps and trial.num_workers == workers
    assert trial.workers() == [f"worker_{i}" for i in range(workers)]
    loss = trial.tensor("CrossEntropyLoss_output_0")
    last = trial.steps()[-1]
    assert trial.is_step_complete(last) and loss.workers(last) == [f"worker_{i}" for i in range(workers)]
    values = {w: float(loss.value(0, worker=w)) for w in loss.workers(0)}
    assert len(set(values.values())) == workers  # each worker's own loss, on its own shard of the data


def check_profiler_output(s3_client: Any, bucket: str, prefix: str, ranks: dict[int, str]) -> None:
    """System metrics from every host (NodeId per host), a framework timeline per rank."""
    names = keys(s3_client, bucket, f"{prefix}/profiler-output/")
    nodes = {m.group(1) for k in names if (m := re.match(r"system/incremental/\d+/\d{10}\.(algo-\d+)\.json$", k))}
    assert nodes == set(ranks.values()), names[:20]
    traces = {m.group(1) for k in names if (m := re.match(r"framework/pevents/\d+/\d+_(\d+-algo-\d+)_pythontimeline"
                                                           r"\.json$", k))}
    assert traces == {f"{rank}-{host}" for rank, host in ranks.items()}, names
    assert {"system/training_job_end.ts", "framework/training_job_end.ts"} <= set(names)


def check_outputs(s3_client: Any, bucket: str, model_prefix: str, ranks: dict[int, str], master_addr: str) -> None:
    """model.tar.gz from rank 0; output.tar.gz aggregates every host's output data: what each rank saw."""
    model = tarball(s3_client, bucket, f"{model_prefix}/model.tar.gz")
    assert list(model) == ["model.pth"]
    data = tarball(s3_client, bucket, f"{model_prefix}/output.tar.gz")
    assert sorted(data) == sorted(f"seen-rank{r}.json" for r in ranks)
    hosts = sorted(set(ranks.values()))
    for rank, host in ranks.items():
        seen = json.loads(data[f"seen-rank{rank}.json"])
        assert (seen["RANK"], seen["WORLD_SIZE"], seen["SM_CURRENT_HOST"], seen["CURRENT_HOST"]) == \
            (str(rank), str(len(ranks)), host, host)
        assert seen["MASTER_ADDR"] == master_addr and json.loads(seen["SM_HOSTS"]) == hosts
        assert seen["resourceconfig"]["current_host"] == host and seen["resourceconfig"]["hosts"] == hosts
        assert seen["training_env"]["is_master"] == (host == "algo-1")
        assert seen["training_env"]["distribution_hosts"] == hosts and seen["steps"] == 16


def check_logs(job_dir: Path, ranks: dict[int, str]) -> None:
    """Each host's log holds its own ranks' lines."""
    for rank, host in ranks.items():
        log = job_dir / "logs" / ("training.log" if host == "algo-1" else f"training-{host}.log")
        assert f"rank {rank} of {len(ranks)}" in log.read_text(errors="replace"), log
