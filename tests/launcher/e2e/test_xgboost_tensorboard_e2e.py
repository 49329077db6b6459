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

from tests.launcher.e2e.test_e2e import sdlocal

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


def test_pytorch_job_tensorboard_output_lands_in_s3(tmp_path: Path, moto_server: str, s3_client: Any) -> None:
    """The PyTorch example with a TensorBoardOutputConfig: the zero-code hook writes event files
    that S3 holds after the job, readable by TensorBoard's own reader."""
    import yaml
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from tests.launcher.e2e.test_e2e import REPO

    spec = yaml.safe_load((REPO / "examples" / "job.yaml").read_text())
    spec["SourceDir"] = str(REPO / "examples")
    spec["HyperParameters"] = {"steps": "20", "lr": "0.05"}
    spec["TensorBoardOutputConfig"] = {"S3OutputPath": "s3://sdlocal/tb"}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(spec))
    job = f"tb-pt-{uuid.uuid4().hex[:6]}"
    proc = sdlocal(["run", str(path), "--runtime", "process", "--job-name", job], tmp_path, moto_server)
    _out, err = proc.communicate(timeout=400)
    assert proc.returncode == 0, err
    listing = s3_client.list_objects_v2(Bucket="sdlocal", Prefix=f"tb/{job}/tensorboard-output/").get("Contents", [])
    events = [o["Key"] for o in listing if "tfevents" in o["Key"]]
    assert len(events) == 1
    local = tmp_path / "tb"
    local.mkdir()
    (local / Path(events[0]).name).write_bytes(s3_client.get_object(Bucket="sdlocal", Key=events[0])["Body"].read())
    acc = EventAccumulator(str(local), size_guidance={"scalars": 0, "histograms": 0})
    acc.Reload()
    losses = [t for t in acc.Tags()["scalars"] if t.startswith("train/") and "Loss" in t]
    assert losses and [e.step for e in acc.Scalars(losses[0])] == list(range(20))  # losses: save_interval 1
    gradients = [t for t in acc.Tags()["histograms"] if t.startswith("train/gradient/")]
    assert gradients and [e.step for e in acc.Histograms(gradients[0])] == [0, 5, 10, 15]  # save_interval 5
