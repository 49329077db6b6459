"""End to end (process runtime): a framework-mode XGBoost script whose own smdebug hook is given
SageMaker's container paths (`out_dir="/opt/ml/output/tensors"`, `tensorboard_dir=
"/opt/ml/output/tensorboard"`, the notebooks' defaults) writes into the job: its tensors reach
debug-output and the job's rules judge them, its TensorBoard files reach tensorboard-output, and
nothing is created under this host's /opt/ml."""
from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from sdlocal.trial import create_trial
from tests.hook.test_job_paths import opt_ml_snapshot
from tests.launcher.e2e.test_e2e import sdlocal

pytestmark = pytest.mark.slow
SOURCE = Path(__file__).parents[1] / "data" / "xgb_framework"


def test_framework_xgboost_script_with_container_paths(tmp_path: Path, moto_server: str, s3_client: Any,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    job = f"xgb-optml-{uuid.uuid4().hex[:6]}"
    request = {
        "TrainingJobName": job, "EntryPoint": "train_xgb_framework.py", "SourceDir": str(SOURCE),
        "HyperParameters": {"max_depth": "8", "num_round": "30"},
        "DebugHookConfig": {"S3OutputPath": "s3://sdlocal/jobs"},
        "TensorBoardOutputConfig": {"S3OutputPath": "s3://sdlocal/tb"},
        "DebugRuleConfigurations": [
            {"RuleConfigurationName": "TreeDepth", "RuleParameters": {"rule_to_invoke": "TreeDepth", "depth": "4"}},
            {"RuleConfigurationName": "LossNotDecreasing",
             "RuleParameters": {"rule_to_invoke": "LossNotDecreasing", "collection_names": "metrics",
                                "num_steps": "4"}},
        ],
    }
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump(request))
    before = opt_ml_snapshot()
    proc = sdlocal(["run", str(spec), "--runtime", "process"], tmp_path, moto_server)
    out, err = proc.communicate(timeout=400)
    assert opt_ml_snapshot() == before, "the job wrote to this host's /opt/ml"
    assert proc.returncode == 0, err[-4000:]
    statuses = {s["RuleConfigurationName"]: s["RuleEvaluationStatus"] for s in json.loads(out)}
    # depth 8 trees on noisy data: TreeDepth sees them; the validation loss rises as they overfit
    assert statuses == {"TreeDepth": "IssuesFound", "LossNotDecreasing": "IssuesFound"}, err[-4000:]
    # the script's trial, read from the job's debug-output in S3
    keys = [o["Key"] for page in s3_client.get_paginator("list_objects_v2").paginate(
        Bucket="sdlocal", Prefix=f"jobs/{job}/debug-output/") for o in page.get("Contents", [])]
    assert f"jobs/{job}/debug-output/training_job_end.ts" in keys
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto_server)
    trial = create_trial(f"s3://sdlocal/jobs/{job}/debug-output")
    assert trial.steps() == list(range(0, 30, 2))
    assert {"train-logloss", "validation-logloss", "trees/Depth"} <= set(trial.tensor_names())
    assert max(trial.tensor("trees/Depth").value(28)) > 4
    tb = s3_client.list_objects_v2(Bucket="sdlocal", Prefix=f"tb/{job}/tensorboard-output/").get("Contents", [])
    assert any("tfevents" in o["Key"] and o["Size"] > 100 for o in tb), tb
