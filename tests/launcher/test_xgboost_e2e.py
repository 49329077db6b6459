"""End to end: the XGBoost example job (examples/xgboost/job.yaml) under `sdlocal run` with the
process runtime: the three XGBoost rules and LossNotDecreasing reach their verdicts, the report
and the TensorBoard files land in S3; a leaked feature (with the script creating no hook: zero-code)
fires FeatureImportanceOverweight, deep trees fire TreeDepth. (One fault per job: a leaked feature
separates the classes at the root, so its trees stay shallow.)"""
from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.launcher.test_e2e import sdlocal

pytestmark = pytest.mark.slow
SPEC = "examples/xgboost/job.yaml"


def _statuses(out: str) -> dict[str, str]:
    return {s["RuleConfigurationName"]: s["RuleEvaluationStatus"] for s in json.loads(out)}


def test_xgboost_example_job(tmp_path: Path, moto_server: str, s3_client: Any) -> None:
    tag = uuid.uuid4().hex[:6]
    healthy, leak, deep = f"xgb-ok-{tag}", f"xgb-leak-{tag}", f"xgb-deep-{tag}"
    procs = {
        healthy: sdlocal(["run", SPEC, "--runtime", "process", "--job-name", healthy], tmp_path, moto_server),
        leak: sdlocal(["run", SPEC, "--runtime", "process", "--job-name", leak, "-p", "leak=1",
                       "-p", "smdebug_hook=0"], tmp_path, moto_server),
        deep: sdlocal(["run", SPEC, "--runtime", "process", "--job-name", deep, "-p", "max_depth=10"],
                      tmp_path, moto_server),
    }
    results = {job: p.communicate(timeout=500) for job, p in procs.items()}
    for job, (_out, err) in results.items():
        assert procs[job].returncode == 0, err
        assert "Training completed" in err
    assert _statuses(results[healthy][0]) == {"CreateXgboostReport": "NoIssuesFound",
                                              "FeatureImportanceOverweight": "NoIssuesFound",
                                              "TreeDepth": "NoIssuesFound", "LossNotDecreasing": "NoIssuesFound"}
    leaked, deeper = _statuses(results[leak][0]), _statuses(results[deep][0])
    assert leaked["FeatureImportanceOverweight"] == "IssuesFound" and leaked["TreeDepth"] == "NoIssuesFound"
    assert deeper["TreeDepth"] == "IssuesFound" and deeper["FeatureImportanceOverweight"] == "NoIssuesFound"
    assert leaked["CreateXgboostReport"] == deeper["CreateXgboostReport"] == "NoIssuesFound"
    for job in (healthy, leak):
        key = f"jobs/{job}/rule-output/CreateXgboostReport/xgboost_report.html"
        html = s3_client.get_object(Bucket="sdlocal", Key=key)["Body"].read().decode()
        assert ">Confusion matrix</h2>" in html and ">SHAP values</h2>" in html and job in html
        assert "No SHAP values" not in html and "No predictions" not in html
        tb = s3_client.list_objects_v2(Bucket="sdlocal", Prefix=f"tensorboard/{job}/tensorboard-output/")
        assert any("tfevents" in o["Key"] and o["Size"] > 1000 for o in tb.get("Contents", [])), job
