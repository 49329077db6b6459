"""The XGBoost example job (examples/xgboost/job.yaml) with the docker runtime: the training image
runs the XGBoost script (the script's own smdebug.xgboost hook, and zero-code), the rules reach the
same verdicts as under the process runtime (tests/launcher/e2e/test_xgboost_algorithm_e2e.py), and the report
and TensorBoard files land in S3."""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.docker.test_runtime import finish, leftovers, sdlocal, verdicts

pytestmark = pytest.mark.docker
SPEC = "examples/xgboost/job.yaml"


@pytest.mark.parametrize("variant", ["own-hook", "zero-code"])
def test_xgboost_job_in_containers(variant: str, docker_client: Any, sdlocal_images: Any, moto_server: str,
                                   s3_client: Any, tmp_path: Path) -> None:
    job = f"dk-xgb-{variant}-{uuid.uuid4().hex[:6]}"
    extra = ["-p", "smdebug_hook=0", "-p", "max_depth=10"] if variant == "zero-code" else []
    code, rows, err = finish(sdlocal(["run", SPEC, "--job-name", job, *extra], tmp_path, moto_server))
    assert code == 0, err
    assert "Runtime: docker" in err and "Training completed" in err
    got = verdicts(rows)
    assert set(got) == {"CreateXgboostReport", "FeatureImportanceOverweight", "TreeDepth", "LossNotDecreasing"}
    assert got["TreeDepth"] == ("IssuesFound" if variant == "zero-code" else "NoIssuesFound")
    assert got["CreateXgboostReport"] == got["FeatureImportanceOverweight"] == "NoIssuesFound"
    html = s3_client.get_object(Bucket="sdlocal", Key=f"jobs/{job}/rule-output/CreateXgboostReport/"
                                "xgboost_report.html")["Body"].read().decode()
    assert ">Confusion matrix</h2>" in html and "No SHAP values" not in html
    tb = s3_client.list_objects_v2(Bucket="sdlocal", Prefix=f"tensorboard/{job}/tensorboard-output/")
    assert any("tfevents" in o["Key"] for o in tb.get("Contents", []))
    assert leftovers(docker_client, job) == []
