"""ReplicaDivergence end to end on the process runtime (issue 28): `sdlocal run` of a job of 2 hosts
(torchrun, gloo over loopback) with the hook's default `include_workers` one: only rank 0 saves
tensors, yet every rank writes its training records, so the rule compares the replicas. The bug
(a step that bypasses the DDP wrapper) is found; the same job without it is not."""
from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.launcher._smjob import sdlocal

pytestmark = pytest.mark.slow
SCRIPT_DIR = Path(__file__).parents[1] / "data" / "ddp_drift"


def request(job: str, bypass: bool) -> dict[str, Any]:
    return {
        "TrainingJobName": job, "EntryPoint": "train_drift.py", "SourceDir": str(SCRIPT_DIR),
        "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 2, "VolumeSizeInGB": 30},
        "HyperParameters": {"bypass": "true" if bypass else "false",
                            "sagemaker_torch_distributed_enabled": "true",
                            "sagemaker_mpi_num_of_processes_per_host": "1"},
        "DebugHookConfig": {"HookParameters": {"save_interval": "1"}},
        "DebugRuleConfigurations": [{"RuleConfigurationName": "ReplicaDivergence",
                                     "RuleParameters": {"rule_to_invoke": "ReplicaDivergence"}}],
    }


@pytest.mark.parametrize(("bypass", "expected"), [(True, "IssuesFound"), (False, "NoIssuesFound")])
def test_two_hosts_replicas_compared(tmp_path: Path, moto_server: str, s3_client: Any, bypass: bool,
                                     expected: str) -> None:
    job = f"drift-{uuid.uuid4().hex[:8]}"
    spec = tmp_path / f"{job}.yaml"
    spec.write_text(yaml.safe_dump(request(job, bypass)))
    proc = sdlocal(["run", str(spec)], tmp_path / "home", moto_server, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    statuses = {s["RuleConfigurationName"]: s for s in json.loads(proc.stdout)}
    assert statuses["ReplicaDivergence"]["RuleEvaluationStatus"] == expected, statuses
    pages = s3_client.get_paginator("list_objects_v2").paginate(Bucket="sdlocal", Prefix=f"jobs/{job}/debug-output/")
    keys = [o["Key"] for page in pages for o in page.get("Contents", [])]
    # include_workers one: rank 0's tensors only, both ranks' records
    assert {k.split("/")[4] for k in keys if "/records/" in k} == {"worker_0", "worker_1"}, keys
    assert not [k for k in keys if "worker_1" in k and "/records/" not in k]
