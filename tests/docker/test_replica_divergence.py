"""ReplicaDivergence on the docker runtime (issue 28): the 2-host job of
tests/launcher/e2e/test_replica_divergence_e2e.py, one training container per host, include_workers one.
Needs images built from a tree with the training records (hook/records.py) and the rule
(SDLOCAL_TEST_TRAINING_IMAGE runs the training from another local image)."""
from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.launcher._smjob import sdlocal
from tests.launcher.e2e.test_replica_divergence_e2e import request

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.mark.parametrize(("bypass", "expected"), [(True, "IssuesFound"), (False, "NoIssuesFound")])
def test_two_containers_replicas_compared(sdlocal_images: Any, moto_server: str, s3_client: Any, tmp_path: Path,
                                          bypass: bool, expected: str) -> None:
    job = f"dk-drift-{uuid.uuid4().hex[:6]}"
    spec = request(job, bypass)
    spec["AlgorithmSpecification"] = {"TrainingImage": os.environ.get("SDLOCAL_TEST_TRAINING_IMAGE",
                                                                      sdlocal_images.training),
                                      "TrainingInputMode": "File"}
    path = tmp_path / f"{job}.yaml"
    path.write_text(yaml.safe_dump(spec))
    result = sdlocal(["run", str(path)], tmp_path, moto_server, runtime="docker", timeout=900)
    assert result.returncode == 0, result.stderr[-4000:]
    statuses = {s["RuleConfigurationName"]: s["RuleEvaluationStatus"] for s in json.loads(result.stdout)}
    assert statuses == {"ReplicaDivergence": expected}, result.stdout
    pages = s3_client.get_paginator("list_objects_v2").paginate(Bucket="sdlocal", Prefix=f"jobs/{job}/debug-output/")
    keys = [o["Key"] for page in pages for o in page.get("Contents", [])]
    assert {k.split("/")[4] for k in keys if "/records/" in k} == {"worker_0", "worker_1"}, keys
