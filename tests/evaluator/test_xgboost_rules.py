"""The XGBoost rules (FeatureImportanceOverweight, TreeDepth, CreateXgboostReport) and the universal
ones on trials written by real xgboost trainings through sdlocal's XGBoost hook."""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from detection import xgb as runs
from sdlocal.evaluator.api import evaluate_trial, run_rule
from sdlocal.evaluator.reports.xgboost import XgboostReportInput, classification_rows, confusion, task_of
from sdlocal.evaluator.status import Status
from sdlocal.trial import create_trial
from sdlocal.trial.storage import open_storage
from sdlocal.trial.writer import TrialWriter

REPORT_COLLECTIONS = ["metrics", "losses", "hyperparameters", "predictions", "labels", "feature_importance",
                      "average_shap", "full_shap", "trees"]


def _train(tmp_path: Path, name: str, setup: runs.XgbSetup, collections: list[str] | None = None) -> Path:
    request = None
    if collections is not None:
        request = {"HookParameters": {"save_interval": "1"},
                   "CollectionConfigurations": [{"CollectionName": c} for c in collections]}
    runs.train_xgb(setup, tmp_path / name, request)
    return tmp_path / name


def _status(trial: Path, rule: str, **params: str) -> Status:
    return evaluate_trial(str(trial), rule, params).status


@pytest.fixture(scope="module")
def trials(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("xgb")
    return {
        "healthy": _train(tmp, "healthy", replace(runs.healthy_xgb(), n=2000, rounds=30)),
        "leak": _train(tmp, "leak", replace(runs.leaked_feature(), rounds=20)),
        "deep": _train(tmp, "deep", replace(runs.deep_trees(), rounds=12)),
        "overfit": _train(tmp, "overfit", replace(runs.xgb_overfit(), rounds=30)),
        "imbalance": _train(tmp, "imbalance", replace(runs.xgb_imbalance(), rounds=15)),
    }


def test_feature_importance_overweight(trials: dict[str, Path]) -> None:
    assert _status(trials["leak"], "FeatureImportanceOverweight") is Status.ISSUES_FOUND
    assert _status(trials["healthy"], "FeatureImportanceOverweight") is Status.NO_ISSUES_FOUND
    # the healthy model's 6 informative features share the weight: the top 6 hold nearly all of it
    assert _status(trials["healthy"], "FeatureImportanceOverweight", nfeatures="6") is Status.ISSUES_FOUND
    bad = evaluate_trial(str(trials["healthy"]), "FeatureImportanceOverweight", {"threshold": "2"})
    assert bad.status is Status.ERROR and "threshold" in bad.status_details


def test_tree_depth_true_depth_and_the_node_id_estimate(trials: dict[str, Path], tmp_path: Path) -> None:
    assert _status(trials["deep"], "TreeDepth") is Status.ISSUES_FOUND
    assert _status(trials["healthy"], "TreeDepth") is Status.NO_ISSUES_FOUND  # max_depth 3 ≤ 4
    assert _status(trials["healthy"], "TreeDepth", depth="2") is Status.ISSUES_FOUND
    # a trial with node ids only (as smdebug's hook wrote): depth = floor(log2(largest node id))
    for name, largest, expected in (("ids40", 40, Status.ISSUES_FOUND), ("ids30", 30, Status.NO_ISSUES_FOUND)):
        writer = TrialWriter(tmp_path / name)
        writer.write_step(0, "GLOBAL", 0, [("trees/Node", np.arange(largest + 1, dtype=np.float64))])
        writer.write_collections([])
        writer.write_end_marker()
        assert _status(tmp_path / name, "TreeDepth") is expected, name  # log2(40) = 5.3 > 4; log2(30) = 4.9


def test_universal_rules_on_xgboost_trials(trials: dict[str, Path]) -> None:
    assert _status(trials["overfit"], "Overfit") is Status.ISSUES_FOUND
    assert _status(trials["healthy"], "Overfit") is Status.NO_ISSUES_FOUND
    assert _status(trials["imbalance"], "ClassImbalance", samples="300") is Status.ISSUES_FOUND
    assert _status(trials["healthy"], "ClassImbalance", samples="300") is Status.NO_ISSUES_FOUND
    assert _status(trials["healthy"], "Confusion") is Status.NO_ISSUES_FOUND
    assert _status(trials["overfit"], "Confusion") is Status.ISSUES_FOUND  # 30 % flipped labels learned
    for rule in ("LossNotDecreasing", "Overtraining"):
        assert _status(trials["healthy"], rule) is Status.NO_ISSUES_FOUND, rule
    assert _status(trials["overfit"], "LossNotDecreasing") is Status.ISSUES_FOUND  # validation logloss climbs


def test_create_xgboost_report_writes_the_page(tmp_path: Path) -> None:
    trial = _train(tmp_path, "t", replace(runs.healthy_xgb(), n=1000, rounds=12), REPORT_COLLECTIONS)
    out = open_storage(str(tmp_path / "rule-output"))
    status = run_rule(str(trial), {"rule_to_invoke": "CreateXgboostReport"}, rule_configuration_name="CreateXgboostReport",
                      job_name="xgb-job", assume_ended=True, interval=0.01, collections_timeout=0.0,
                      action_output=out)
    assert status.status is Status.NO_ISSUES_FOUND
    html = (tmp_path / "rule-output" / "xgboost_report.html").read_text()
    for heading in ("Metrics", "Feature importance", "SHAP values", "Confusion matrix",
                    "Label and prediction distribution", "Hyperparameters"):
        assert f">{heading}</h2>" in html, heading
    assert "Residuals" not in html  # a classifier
    assert "xgb-job" in html and "<script" not in html
    assert html.count("<svg") >= 6


def test_report_input_for_regression(tmp_path: Path) -> None:
    setup = replace(runs.healthy_xgb(), n=800, rounds=8, params={"objective": "reg:squarederror",
                                                                   "eval_metric": "rmse"})
    import xgboost as xgb

    from sdlocal.hook.config import HookConfig
    from sdlocal.hook.xgboost import Hook

    (x, y), (xv, yv) = runs.data(setup)
    y, yv = x[:, 0] * 3 + x[:, 1], xv[:, 0] * 3 + xv[:, 1]
    dtrain, dval = xgb.DMatrix(x, label=y), xgb.DMatrix(xv, label=yv)
    cfg = HookConfig.from_dict({"LocalPath": str(tmp_path / "r"), "HookParameters": {"save_interval": "1"},
                                "CollectionConfigurations": [{"CollectionName": c} for c in REPORT_COLLECTIONS]},
                               framework="xgboost")
    hook = Hook(cfg, train_data=dtrain, validation_data=dval)
    booster = xgb.train({"objective": "reg:squarederror", "eval_metric": "rmse"}, dtrain, 8,
                        evals=[(dtrain, "train"), (dval, "validation")], callbacks=[hook], verbose_eval=False)
    hook.close()
    data = XgboostReportInput.from_trial(create_trial(tmp_path / "r"), job_name="reg")
    contribs = booster.predict(dtrain, pred_contribs=True)  # the last round's model: the last saved step's
    assert data.shap["f3"] == pytest.approx(float(np.mean(np.abs(contribs[:, 3]))), rel=1e-5)
    assert data.labels is not None and data.predictions is not None
    assert task_of(data.labels, data.predictions)[0] == "regression"
    from sdlocal.evaluator.reports.xgboost import render_xgboost_report

    html = render_xgboost_report(data)
    assert ">Residuals</h2>" in html and "RMSE" in html and ">Confusion matrix</h2>" not in html
    assert {s.name for s in data.metrics} == {"train-rmse", "validation-rmse"}
    assert set(data.shap) == {f"f{i}" for i in range(10)} and data.shap_kind == "full"
    assert max(data.shap, key=lambda k: data.shap[k]) == "f0"  # the label is 3·f0 + f1


def test_shap_column_of_smdebugs_matrix_by_name_or_average() -> None:
    from sdlocal.evaluator.reports.xgboost import shap_column

    matrix = np.array([[1.0, -4.0, 0.5], [3.0, 0.0, 0.5]])  # rows x (age, income, bias)
    assert shap_column("f1", matrix, {}).tolist() == [-4.0, 0.0]  # XGBoost's own names say the column
    assert shap_column("income", matrix, {"age": 2.0, "income": -2.0}).tolist() == [-4.0, 0.0]
    assert shap_column("age", matrix, {"age": 2.0, "income": -2.0}).tolist() == [1.0, 3.0]
    assert shap_column("age", matrix, {}) is None  # nothing tells which column
    assert shap_column("age", np.array([1.0, 3.0]), {}).tolist() == [1.0, 3.0]  # an older trial's column


def test_confusion_and_classification_report() -> None:
    labels = np.array([0, 0, 1, 1, 1, 2.0])
    task, predicted = task_of(labels, np.array([[0.9, 0.1, 0], [0.2, 0.7, 0.1], [0, 1, 0], [0, 0.8, 0.2],
                                               [0.1, 0.1, 0.8], [0, 0, 1.0]]))
    assert task == "classification" and predicted is not None
    m = confusion(labels, predicted, [0, 1, 2])
    assert m.tolist() == [[1, 1, 0], [0, 2, 1], [0, 0, 1]]
    rows = classification_rows(m, [0, 1, 2])
    assert rows[0] == ["0", "1.000", "0.500", "0.667", 1 + 1]
    assert rows[-2][0] == "accuracy" and rows[-2][3] == f"{4 / 6:.3f}"
    assert task_of(np.array([0, 1, 1.0]), np.array([0.2, 0.9, 0.4]))[1].tolist() == [0, 1, 0]
    assert task_of(np.array([0.5, 1.7]), np.array([0.4, 1.9]))[0] == "regression"


def test_hostile_feature_names_are_escaped(tmp_path: Path) -> None:
    writer = TrialWriter(tmp_path / "h")
    evil = "<img src=x onerror=alert(1)>"
    writer.write_step(0, "GLOBAL", 0, [(f"feature_importance/gain/{evil}", np.float64(1.0)),
                                       ("validation-rmse", np.float64(0.5))])
    writer.write_collections([])
    writer.write_end_marker()
    from sdlocal.evaluator.reports.xgboost import render_xgboost_report

    html = render_xgboost_report(XgboostReportInput.from_trial(create_trial(tmp_path / "h"), job_name=evil))
    assert evil not in html and re.search(r"&lt;img src=x", html)
