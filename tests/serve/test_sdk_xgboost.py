"""Issue 20 item 1, through the real SageMaker SDK v2 against `sdlocal serve`: the
xgboost_builtin_rules notebook's setup (SageMaker's built-in XGBoost algorithm from its image URI,
CSV channels, the notebook's collections and rules) runs as on SageMaker, under both runtimes:
the rules reach final statuses, CreateXgboostReport writes its page, DescribeTrainingJob has the
algorithm's metrics (FinalMetricDataList, `training_job_analytics`), the model artifact holds
`xgboost-model`, and a bad hyperparameter is a ValidationException at fit()."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.algorithms._job import abalone, write_csv

SCRIPT = Path(__file__).parent / "scripts" / "sdk_xgboost_job.py"
pytestmark = pytest.mark.slow


def _run_notebook(exports: dict[str, str], sagemaker_python: Path, tmp_path: Path) -> tuple[dict[str, Any], str]:
    x, y = abalone(1500, seed=7)
    write_csv(tmp_path / "data" / "abalone.train", x[:1200], y[:1200])
    write_csv(tmp_path / "data" / "abalone.validation", x[1200:], y[1200:])
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), **exports}
    proc = subprocess.run([str(sagemaker_python), str(SCRIPT), str(tmp_path / "data" / "abalone.train"),
                           str(tmp_path / "data" / "abalone.validation")],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    (tmp_path / "sdk-output.txt").write_text(out)
    assert proc.returncode == 0, out[-5000:]
    return json.loads(out.split("SDK-RESULT ", 1)[1].splitlines()[0]), out


def _check(seen: dict[str, Any], out: str) -> None:
    assert seen["image"] == "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-xgboost:1.7-1"
    assert seen["status"] == "Completed", out[-3000:]
    # fit(logs=...) showed the algorithm's metric lines, as CloudWatch shows them
    assert "[50]#011train-rmse:" in out and "#011validation-rmse:" in out, out[-3000:]
    # the rules judged the algorithm's tensors: final statuses, none Error
    assert set(seen["rules"]) == {"LossNotDecreasing", "Overtraining", "CreateXgboostReport"}
    assert all(s in ("NoIssuesFound", "IssuesFound") for s in seen["rules"].values()), seen["rules"]
    assert seen["rules"]["CreateXgboostReport"] == "NoIssuesFound"
    assert "xgboost_report.html" in seen["report_keys"] and seen["report_bytes"] > 10_000
    # the algorithm's metric definitions and their final values (the last round's line)
    assert {"train:rmse", "validation:rmse", "validation:mae"} <= set(seen["metric_definitions"])
    rounds = [line for line in out.splitlines() if "[50]#011train-rmse:" in line]
    last = dict(part.split(":", 1) for part in rounds[-1].split("#011")[1:])
    assert seen["final_metrics"]["train:rmse"] == pytest.approx(float(last["train-rmse"]))
    assert seen["final_metrics"]["validation:rmse"] == pytest.approx(float(last["validation-rmse"]))
    assert {"train:rmse", "validation:rmse"} <= set(seen["analytics"])
    assert seen["model_members"] == ["xgboost-model"]
    bad = seen["bad_hyperparameter"]
    assert bad["code"] == "ValidationException" and "max_depth" in bad["message"], bad


def test_builtin_xgboost_notebook_process_runtime(served: tuple[Path, dict[str, str]], sagemaker_python: Path,
                                                  tmp_path: Path) -> None:
    _check(*_run_notebook(served[1], sagemaker_python, tmp_path))


@pytest.mark.docker
def test_builtin_xgboost_notebook_docker_runtime(served_docker: tuple[Path, dict[str, str]],
                                                 sagemaker_python: Path, tmp_path: Path) -> None:
    _check(*_run_notebook(served_docker[1], sagemaker_python, tmp_path))
