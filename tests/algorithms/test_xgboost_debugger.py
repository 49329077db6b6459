"""The XGBoost algorithm's built-in Debugger hook, as the xgboost_builtin_rules notebook uses it: a
real run of `python -m sdlocal.hook.algorithms.xgboost` on abalone-like csv data with the notebook's
collections and the XGBoost rules attached; its trial read back by sdlocal's reader and by the
real smdebug 1.0.34 reader (side virtualenv); the rules run over it with `sdlocal evaluate`; the
CreateXgboostReport evaluator writing its page, looked at in headless Chromium. Then a binary
classifier on imbalanced libsvm data for ClassImbalance."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from sdlocal.trial import create_trial
from tests.algorithms._job import REPO, Run, abalone, channel, run_algorithm, write_csv, write_libsvm
from tests.chromium import render_page

pytestmark = pytest.mark.slow
RULE_IMAGE = "503895931360.dkr.ecr.us-east-1.amazonaws.com/sagemaker-debugger-rules:latest"
SAVE_INTERVAL = 5
NOTEBOOK_HPS = {"max_depth": "5", "eta": "0.2", "gamma": "4", "min_child_weight": "6", "subsample": "0.7",
                "objective": "reg:squarederror", "num_round": "51"}


def _rule(name: str, **params: str) -> dict:
    return {"RuleConfigurationName": name, "RuleEvaluatorImage": RULE_IMAGE,
            "RuleParameters": {"rule_to_invoke": name, **params}}


@pytest.fixture(scope="module")
def regression(tmp_path_factory: pytest.TempPathFactory) -> Run:
    tmp = tmp_path_factory.mktemp("notebook")
    x, y = abalone(1500, seed=3)
    write_csv(tmp / "data" / "train" / "abalone.train", x[:1200], y[:1200])
    write_csv(tmp / "data" / "validation" / "abalone.validation", x[1200:], y[1200:])
    collections = [{"CollectionName": c, "CollectionParameters": {"save_interval": str(SAVE_INTERVAL)}}
                   for c in ("metrics", "feature_importance", "average_shap")]
    collections.append({"CollectionName": "full_shap", "CollectionParameters": {"save_interval": "25"}})
    rules = [_rule("LossNotDecreasing", collection_names="metrics", num_steps=str(SAVE_INTERVAL * 2)),
             _rule("Overtraining"), _rule("Overfit"), _rule("TreeDepth"), _rule("FeatureImportanceOverweight"),
             _rule("CreateXgboostReport")]
    run = run_algorithm(tmp, NOTEBOOK_HPS, [channel("train", tmp / "data" / "train", "text/csv"),
                                            channel("validation", tmp / "data" / "validation", "text/csv")],
                        debug_hook={"CollectionConfigurations": collections}, rules=rules)
    assert run.returncode == 0, run.stderr
    return run


def test_the_notebooks_collections_in_our_reader(regression: Run) -> None:
    tr = create_trial(regression.job.tensors)
    assert tr.training_ended()
    assert tr.tensor_names(collection="metrics") == ["train-rmse", "validation-rmse"]
    assert tr.tensor("validation-rmse").steps()[:3] == [0, 5, 10] and 50 in tr.tensor("validation-rmse").steps()
    printed = [line for line in regression.stdout.splitlines() if line.startswith("[50]#011")][0]
    assert float(printed.rsplit(":", 1)[1]) == pytest.approx(float(tr.tensor("validation-rmse").value(50)), abs=1e-5)
    weights = tr.tensor_names(regex="^feature_importance/weight/")
    assert sum(float(tr.tensor(n).value(50)) for n in weights) == pytest.approx(1.0)
    assert "feature_importance/gain/f7" in tr.tensor_names()  # shell weight: what the rings follow
    assert tr.tensor_names(collection="average_shap") == [f"average_shap/f{i}" for i in range(8)]
    assert tr.tensor("full_shap/f7").value(25).shape == (1200, 9)  # every training row x (8 features + bias)
    # the rules' own collections came with them (TreeDepth: trees; CreateXgboostReport: labels, ...)
    assert tr.tensor("trees/Depth").value(50).max() <= 5  # max_depth 5
    assert tr.tensor("labels").value(50).shape == (300,)  # the validation channel
    assert tr.tensor("predictions").value(50).shape == (300,)
    assert float(tr.tensor("hyperparameters/max_depth").value(0)) == 5.0
    assert float(tr.tensor("hyperparameters/eta").value(0)) == pytest.approx(0.2)


@pytest.mark.interop
def test_the_real_smdebug_reads_the_trial(regression: Run, smdebug_python: Path) -> None:
    read = textwrap.dedent("""
        import json, sys
        from smdebug.trials import create_trial
        tr = create_trial(sys.argv[1])
        colls = ["metrics", "feature_importance", "average_shap", "full_shap", "trees", "predictions", "labels",
                 "hyperparameters"]
        print(json.dumps({"steps": tr.steps(),
                          "collections": {c: sorted(tr.tensor_names(collection=c)) for c in colls},
                          "val": float(tr.tensor("validation-rmse").value(45)),
                          "gain": float(tr.tensor("feature_importance/gain/f7").value(45)),
                          "shap": tr.tensor("full_shap/f0").value(25)[:5].tolist(),
                          "depth": tr.tensor("trees/Depth").value(50).tolist()}))
    """)
    proc = subprocess.run([str(smdebug_python), "-c", read, str(regression.job.tensors)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    ours = create_trial(regression.job.tensors)
    assert got["steps"] == ours.steps()
    for coll, names in got["collections"].items():
        assert names and names == sorted(ours.tensor_names(collection=coll)), coll
    assert got["val"] == pytest.approx(float(ours.tensor("validation-rmse").value(45)))
    assert got["gain"] == pytest.approx(float(ours.tensor("feature_importance/gain/f7").value(45)))
    np.testing.assert_allclose(got["shap"], ours.tensor("full_shap/f0").value(25)[:5], rtol=1e-6)
    assert got["depth"] == ours.tensor("trees/Depth").value(50).tolist()


def _evaluate(trial: Path, rule: str, *params: str) -> dict:
    args = [sys.executable, "-m", "sdlocal", "evaluate", str(trial), "--rule", rule, "--json"]
    for p in params:
        args += ["--param", p]
    env = {**os.environ, "PYTHONPATH": str(REPO), "SDLOCAL_HOME": str(trial.parent / ".sdlocal")}
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (status,) = json.loads(proc.stdout[proc.stdout.index("["):])
    return status  # type: ignore[no-any-return]


def test_the_notebooks_rules_with_sdlocal_evaluate(regression: Run) -> None:
    trial = regression.job.tensors
    statuses = {rule: _evaluate(trial, rule, *params)["RuleEvaluationStatus"] for rule, params in (
        ("LossNotDecreasing", ("collection_names=metrics", f"num_steps={SAVE_INTERVAL * 2}", "diff_percent=0.5")),
        ("Overtraining", ()), ("Overfit", ()), ("TreeDepth", ("depth=5",)))}
    # LossNotDecreasing compares the metrics' means over 10-round windows (b - 10, b] every 10
    # rounds (windows of equal length: the first holds round 0 alone): it fires where one did not
    # go down by 0.5 %
    tr = create_trial(trial)
    points = range(0, 51, SAVE_INTERVAL * 2)

    def window(metric: str, end: int) -> list[float]:
        return [float(tr.tensor(metric).value(s)) for s in range(0, end + 1, SAVE_INTERVAL) if s > end - 2 * SAVE_INTERVAL]

    def not_lower(metric: str, a: int, b: int) -> bool:
        before, now = window(metric, a), window(metric, b)
        k = min(len(before), len(now))
        prev, cur = sum(before[-k:]) / k, sum(now[-k:]) / k
        return prev - cur < 0.005 * prev

    stalled = any(not_lower(m, a, b) for m in ("train-rmse", "validation-rmse") for a, b in zip(points, points[1:], strict=False))
    assert statuses == {"LossNotDecreasing": "IssuesFound" if stalled else "NoIssuesFound",
                        "Overtraining": "NoIssuesFound", "Overfit": "NoIssuesFound", "TreeDepth": "NoIssuesFound"}
    # gamma 4 stops the trees from growing: the notebook's rmse flattens out before round 50
    assert stalled
    assert _evaluate(trial, "TreeDepth", "depth=3")["RuleEvaluationStatus"] == "IssuesFound"  # max_depth 5 > 3
    # the rings follow shell weight: its importance outweighs the rest
    overweight = _evaluate(trial, "FeatureImportanceOverweight", "nfeatures=1", "threshold=0.3")
    assert overweight["RuleEvaluationStatus"] == "IssuesFound"


def test_create_xgboost_report_in_chromium(regression: Run, tmp_path: Path) -> None:
    rule_output = tmp_path / "rule-output" / "CreateXgboostReport"
    env = {**os.environ, "PYTHONPATH": str(REPO), "SDLOCAL_JOB_NAME": "xgboost-algorithm",
           "SDLOCAL_RULE_CONFIGURATION_NAME": "CreateXgboostReport",
           "SDLOCAL_RULE_PARAMETERS": json.dumps({"rule_to_invoke": "CreateXgboostReport"}),
           "SDLOCAL_DEBUG_OUTPUT": str(regression.job.tensors), "SDLOCAL_RULE_OUTPUT": str(rule_output),
           "SDLOCAL_POLL_INTERVAL_S": "0.1"}
    proc = subprocess.run([sys.executable, "-m", "sdlocal.evaluator"], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads((rule_output / "status.json").read_text())["RuleEvaluationStatus"] == "NoIssuesFound"
    page_file = rule_output / "xgboost_report.html"
    page = render_page(page_file, tmp_path, ["figure.plot svg", "table", "section h2", "div.cards .card"])
    headings = [t.strip() for t in page.texts["section h2"]]
    assert headings[:3] == ["Metrics", "Feature importance", "SHAP values"] and "Hyperparameters" in headings
    assert "Residuals" in " ".join(headings) or "Label and prediction distribution" in headings  # a regression
    boxes = page.boxes["figure.plot svg"]
    assert len(boxes) >= 5
    for box in boxes:
        assert box.width > 900 and box.height > 150, box
        assert page.ink(box) > 0.02 and page.saturated_share(box) > 0.004, box
    assert any("rmse" in t for t in page.texts["table"])
    if os.environ.get("SDLOCAL_KEEP_REPORT_PNG"):  # to look at it: the page as a person sees it
        Path(os.environ["SDLOCAL_KEEP_REPORT_PNG"]).write_bytes(page.png.read_bytes())


def test_class_imbalance_on_a_binary_classifier(tmp_path: Path) -> None:
    x, rings = abalone(2000, seed=4)
    y = (rings > np.quantile(rings, 0.95)).astype(float)  # about one old abalone in twenty
    write_libsvm(tmp_path / "data" / "train" / "t.libsvm", x[:1600], y[:1600])
    write_libsvm(tmp_path / "data" / "validation" / "v.libsvm", x[1600:], y[1600:])
    run = run_algorithm(tmp_path, {"num_round": "10", "objective": "binary:logistic", "max_depth": "3"},
                        [channel("train", tmp_path / "data" / "train", "text/libsvm"),
                         channel("validation", tmp_path / "data" / "validation", "text/libsvm")],
                        version="1.5-1", rules=[_rule("ClassImbalance")],
                        debug_hook={"HookParameters": {"save_interval": "1"}})
    assert run.returncode == 0, run.stderr
    tr = create_trial(run.job.tensors)
    assert {"labels", "predictions"} <= set(tr.tensor_names())
    assert _evaluate(run.job.tensors, "ClassImbalance", "samples=300")["RuleEvaluationStatus"] == "IssuesFound"
