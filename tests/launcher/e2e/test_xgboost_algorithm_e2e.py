"""End to end: SageMaker's built-in XGBoost algorithm from its image URI under `sdlocal run`
(examples/xgboost/builtin-job.yaml, process runtime): the rules reach their verdicts on the
algorithm's tensors, the report lands in S3, model.tar.gz holds `xgboost-model`; a parquet job (the
training image lacks pyarrow until it is rebuilt: process runtime); a bad hyperparameter and another
SageMaker algorithm are one line naming the field, before anything runs."""
from __future__ import annotations

import io
import json
import tarfile
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.algorithms._job import IMAGE, abalone, write_parquet
from tests.launcher.e2e.test_e2e import sdlocal

pytestmark = pytest.mark.slow
SPEC = "examples/xgboost/builtin-job.yaml"


def test_builtin_xgboost_example_job(tmp_path: Path, moto_server: str, s3_client: Any) -> None:
    job = f"xgb-algo-{uuid.uuid4().hex[:6]}"
    proc = sdlocal(["run", SPEC, "--runtime", "process", "--job-name", job], tmp_path, moto_server)
    out, err = proc.communicate(timeout=500)
    assert proc.returncode == 0, err
    assert "Training completed" in err
    statuses = {s["RuleConfigurationName"]: s["RuleEvaluationStatus"] for s in json.loads(out)}
    assert set(statuses) == {"LossNotDecreasing", "Overtraining", "TreeDepth", "CreateXgboostReport"}
    assert all(s in ("NoIssuesFound", "IssuesFound") for s in statuses.values()), statuses
    html = s3_client.get_object(Bucket="sdlocal", Key=f"jobs/{job}/rule-output/CreateXgboostReport/"
                                                      "xgboost_report.html")["Body"].read().decode()
    assert job in html and ">SHAP values</h2>" in html
    body = s3_client.get_object(Bucket="sdlocal", Key=f"jobs/{job}/output/model.tar.gz")["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
        assert tar.getnames() == ["xgboost-model"]
    assert "[50]#011train-rmse:" in (Path(err.split("logs in ", 1)[1].split()[0]) / "training.log").read_text()


def _parquet_spec(tmp_path: Path, **hyperparameters: str) -> Path:
    x, y = abalone(600, seed=5)
    write_parquet(tmp_path / "data" / "train" / "part-0.parquet", x[:500], y[:500])
    write_parquet(tmp_path / "data" / "validation" / "part-0.parquet", x[500:], y[500:])
    spec = {
        "AlgorithmSpecification": {"TrainingImage": IMAGE.replace("us-east-1", "eu-west-1").replace(
            "683313688378", "141502667606"), "TrainingInputMode": "File"},
        "HyperParameters": {"num_round": "20", "objective": "reg:squarederror", **hyperparameters},
        "InputDataConfig": [
            {"ChannelName": name, "ContentType": "application/x-parquet",
             "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": f"file://data/{name}"}}}
            for name in ("train", "validation")],
        "DebugHookConfig": {"S3OutputPath": "s3://sdlocal/jobs", "CollectionConfigurations": [
            {"CollectionName": "metrics", "CollectionParameters": {"save_interval": "2"}}]},
        "DebugRuleConfigurations": [{"RuleConfigurationName": "LossNotDecreasing", "RuleParameters": {
            "rule_to_invoke": "LossNotDecreasing", "collection_names": "metrics", "num_steps": "4"}}],
    }
    path = tmp_path / "parquet-job.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_parquet_channels_another_region(tmp_path: Path, moto_server: str) -> None:
    job = f"xgb-parquet-{uuid.uuid4().hex[:6]}"
    proc = sdlocal(["run", str(_parquet_spec(tmp_path)), "--runtime", "process", "--job-name", job],
                   tmp_path, moto_server)
    out, err = proc.communicate(timeout=400)
    assert proc.returncode == 0, err
    assert json.loads(out)[0]["RuleEvaluationStatus"] in ("NoIssuesFound", "IssuesFound"), out


@pytest.mark.parametrize(("change", "field"), [
    ({"HyperParameters": {"num_round": "10", "max_depth": "-3"}}, "HyperParameters.max_depth"),
    ({"HyperParameters": {"max_depth": "3"}}, "HyperParameters.num_round"),
    ({"AlgorithmSpecification": {"TrainingImage": "382416733822.dkr.ecr.us-east-1.amazonaws.com/linear-learner:1"}},
     "AlgorithmSpecification.TrainingImage"),
    ({"AlgorithmSpecification": {"TrainingImage": IMAGE.replace("1.7-1", "3.0-5")}},
     "AlgorithmSpecification.TrainingImage"),
])
def test_refused_before_anything_runs(tmp_path: Path, moto_server: str, change: dict[str, Any], field: str) -> None:
    spec = yaml.safe_load(Path(SPEC).read_text())
    spec.update(change)
    for channel in spec["InputDataConfig"]:  # the example's data, from the copied spec's folder
        uri = channel["DataSource"]["S3DataSource"]["S3Uri"]
        channel["DataSource"]["S3DataSource"]["S3Uri"] = "file://" + str(Path(SPEC).parent.resolve() / uri[7:])
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(spec))
    job = f"xgb-bad-{uuid.uuid4().hex[:6]}"
    proc = sdlocal(["run", str(path), "--runtime", "process", "--job-name", job], tmp_path, moto_server)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode != 0
    lines = [line for line in err.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1 and field in lines[0], err
    assert not (tmp_path / "jobs" / job).exists()
