"""The XGBoost hook: smdebug's collections from a real xgboost training, per-collection save
configs, smdebug's API (smdebug.xgboost), zero-code attach under `python -m sdlocal.hook.run`, TensorBoard
files, and the real smdebug reading what it wrote."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import xgboost as xgb
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from sdlocal.hook import _tensorboard
from sdlocal.hook.config import HookConfig
from sdlocal.hook.errors import HookConfigError
from sdlocal.hook.xgboost import IMPORTANCE_TYPES, Hook, load_data
from sdlocal.trial import create_trial

REPO = Path(__file__).resolve().parents[2]
ALL = ["metrics", "losses", "hyperparameters", "predictions", "labels", "feature_importance",
       "average_shap", "full_shap", "trees"]
PARAMS = {"max_depth": 3, "eta": 0.3, "objective": "binary:logistic", "eval_metric": ["logloss", "auc"]}


def _data(n: int = 300, seed: int = 0) -> tuple[xgb.DMatrix, xgb.DMatrix]:
    rng = np.random.default_rng(seed)
    x = rng.random((n, 4))
    y = (x[:, 0] + 0.2 * rng.random(n) > 0.6).astype(float)
    cut = n * 2 // 3
    return xgb.DMatrix(x[:cut], label=y[:cut]), xgb.DMatrix(x[cut:], label=y[cut:])


def _config(out: Path, collections: list[dict], **hook_params: str) -> HookConfig:
    return HookConfig.from_dict({"LocalPath": str(out), "HookParameters": hook_params,
                                 "CollectionConfigurations": collections}, framework="xgboost")


@pytest.fixture(autouse=True)
def _no_job_tensorboard(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_tensorboard.TENSORBOARD_CONFIG_ENV, str(tmp_path / "no-tb-config.json"))


def test_every_collection_is_saved_with_its_values(tmp_path: Path) -> None:
    dtrain, dval = _data()
    cfg = _config(tmp_path / "t", [{"CollectionName": n} for n in ALL], save_interval="2")
    hook = Hook(cfg, hyperparameters=PARAMS, train_data=dtrain, validation_data=dval)
    evals_log: dict = {}
    booster = xgb.train(PARAMS, dtrain, 6, evals=[(dtrain, "train"), (dval, "validation")],
                        evals_result=evals_log, callbacks=[hook], verbose_eval=False)
    hook.close()
    tr = create_trial(tmp_path / "t")
    assert tr.steps() == [0, 2, 4] and tr.training_ended()
    assert tr.tensor_names(collection="metrics") == ["train-auc", "train-logloss", "validation-auc",
                                                     "validation-logloss"]
    assert tr.tensor_names(collection="losses") == ["train-logloss", "validation-logloss"]
    assert tr.tensor("validation-logloss").value(4) == pytest.approx(evals_log["validation"]["logloss"][4])
    assert tr.tensor_names(collection="hyperparameters") == ["hyperparameters/eta", "hyperparameters/max_depth"]
    assert float(tr.tensor("hyperparameters/max_depth").value(0)) == 3.0
    np.testing.assert_allclose(tr.tensor("labels").value(4), dval.get_label())
    preds = tr.tensor("predictions").value(4)
    assert preds.shape == (dval.num_row(),)
    for kind in IMPORTANCE_TYPES:
        names = tr.tensor_names(regex=f"^feature_importance/{kind}/")
        assert sum(float(tr.tensor(n).value(4)) for n in names) == pytest.approx(1.0)
    assert "feature_importance/gain/f0" in tr.tensor_names()  # the informative feature is used
    shap = booster.predict(dtrain, pred_contribs=True)  # the final model is the one of step 4's... +1 round
    assert tr.tensor_names(collection="average_shap") == [f"average_shap/f{i}" for i in range(4)]
    # smdebug 1.0's layout: the whole rows x (features + bias) matrix under each feature's name
    full = tr.tensor("full_shap/f2").value(4)
    assert full.shape == (dtrain.num_row(), 5)
    np.testing.assert_array_equal(full, tr.tensor("full_shap/f0").value(4))
    assert float(tr.tensor("average_shap/f2").value(4)) == pytest.approx(float(np.mean(full[:, 2])))
    assert "average_shap/bias" not in tr.tensor_names() and shap.shape[1] == 5
    depth = tr.tensor("trees/Depth").value(4)
    tree_ids = tr.tensor("trees/Tree").value(4)
    assert set(tree_ids.tolist()) == {4.0}  # the tree built in round 4 only
    assert 1 <= depth.max() <= 3
    leaves = tr.tensor("trees/Feature").value(4) == -1
    assert leaves.any() and np.isnan(tr.tensor("trees/Leaf").value(4)[~leaves]).all()


def test_per_collection_save_configs_and_default_metrics(tmp_path: Path) -> None:
    dtrain, dval = _data()
    cfg = _config(tmp_path / "t", [{"CollectionName": "metrics", "CollectionParameters": {"save_interval": "1"}},
                                   {"CollectionName": "trees", "CollectionParameters": {"save_steps": "1,3"}}])
    hook = Hook(cfg)
    xgb.train(PARAMS, dtrain, 5, evals=[(dval, "validation")], callbacks=[hook], verbose_eval=False)
    hook.close()
    tr = create_trial(tmp_path / "t")
    assert tr.tensor("validation-logloss").steps() == [0, 1, 2, 3, 4]
    assert tr.tensor("trees/Node").steps() == [0, 1, 3]  # save_steps and the interval (10), as smdebug
    # the launcher's steps-to-judge record: 5 rounds run, each collection's scheduled rounds
    record = json.loads((tmp_path / "t" / ".sdlocal-steps.json").read_text())
    assert record["steps"] == 5 and record["scheduled_steps"] == {"metrics": 5, "trees": 3}
    # nothing configured: metrics every 10 rounds (smdebug's XGBoost defaults)
    hook = Hook(_config(tmp_path / "d", []))
    xgb.train(PARAMS, dtrain, 12, evals=[(dval, "validation")], callbacks=[hook], verbose_eval=False)
    hook.close()
    tr = create_trial(tmp_path / "d")
    assert tr.steps() == [0, 10] and tr.tensor_names() == ["validation-auc", "validation-logloss"]


def test_second_training_continues_the_steps(tmp_path: Path) -> None:
    dtrain, dval = _data()
    hook = Hook(_config(tmp_path / "t", [{"CollectionName": "metrics"}], save_interval="1"))
    for _ in range(2):
        xgb.train(PARAMS, dtrain, 3, evals=[(dval, "validation")], callbacks=[hook], verbose_eval=False)
    hook.close()
    assert create_trial(tmp_path / "t").steps() == list(range(6))


def test_data_files_and_bad_data(tmp_path: Path) -> None:
    csv = tmp_path / "val.csv"
    csv.write_text("1,0.5,0.2\n0,0.1,0.9\n")
    dm = load_data((str(csv), "text/csv"), "validation_data")
    assert dm is not None and dm.num_row() == 2 and dm.get_label().tolist() == [1.0, 0.0]
    with pytest.raises(HookConfigError, match="no such file"):
        load_data((str(tmp_path / "missing.csv"), "csv"), "train_data")
    with pytest.raises(HookConfigError, match="not csv or libsvm"):
        load_data((str(csv), "parquet"), "train_data")
    with pytest.raises(HookConfigError, match="expected an xgboost.DMatrix"):
        load_data([1, 2], "train_data")


def test_tensorboard_scalars_from_the_xgboost_hook(tmp_path: Path) -> None:
    dtrain, dval = _data()
    cfg = _config(tmp_path / "t", [{"CollectionName": "metrics"}, {"CollectionName": "predictions"}],
                  save_interval="1", export_tensorboard="true")
    hook = Hook.create_from_json_file(_write_json(tmp_path, cfg_dict(tmp_path / "t", save_interval="1",
                                                                    export_tensorboard="true")))
    assert cfg.tensorboard_dir == str(tmp_path / "t" / "tensorboard")
    hook.validation_data = dval
    evals_log: dict = {}
    xgb.train(PARAMS, dtrain, 4, evals=[(dval, "validation")], evals_result=evals_log, callbacks=[hook],
              verbose_eval=False)
    hook.close()
    acc = EventAccumulator(str(tmp_path / "t" / "tensorboard"))
    acc.Reload()
    curve = acc.Scalars("validation-logloss")
    assert [e.step for e in curve] == [0, 1, 2, 3]
    assert [e.value for e in curve] == pytest.approx(evals_log["validation"]["logloss"], rel=1e-6)
    assert acc.Histograms("predictions")[-1].histogram_value.num == dval.num_row()


def cfg_dict(out: Path, **hook_params: str) -> dict:
    return {"LocalPath": str(out), "HookParameters": hook_params,
            "CollectionConfigurations": [{"CollectionName": "metrics"}, {"CollectionName": "predictions"}]}


def _write_json(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "debughookconfig.json"
    path.write_text(json.dumps(data))
    return path


SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import xgboost as xgb
    rng = np.random.default_rng(0)
    x = rng.random((300, 4)); y = (x[:, 0] > 0.5).astype(float)
    dtrain = xgb.DMatrix(x[:200], label=y[:200]); dval = xgb.DMatrix(x[200:], label=y[200:])
    params = {"max_depth": 2, "objective": "binary:logistic", "eval_metric": "logloss"}
    callbacks = []
    if sys.argv[1] == "own":
        from smdebug.xgboost import Hook
        hook = Hook.create_from_json_file()
        hook.hyperparameters = params
        hook.validation_data = dval
        callbacks = [hook]
    xgb.train(params, dtrain, 5, evals=[(dtrain, "train"), (dval, "validation")], callbacks=callbacks,
              verbose_eval=False)
""")


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["zero-code", "own"])
def test_hook_run_attaches_or_uses_the_scripts_hook(tmp_path: Path, mode: str) -> None:
    script = tmp_path / "train_xgb.py"
    script.write_text(SCRIPT)
    out = tmp_path / "tensors"
    cfg = _write_json(tmp_path, {"LocalPath": str(out), "HookParameters": {"save_interval": "2"},
                                 "CollectionConfigurations": [{"CollectionName": n} for n in
                                                              ("metrics", "hyperparameters", "predictions",
                                                               "labels", "average_shap")]})
    env = {**os.environ, "PYTHONPATH": str(REPO), "SMDEBUG_CONFIG_FILE_PATH": str(cfg),
           "TENSORBOARD_CONFIG_FILE_PATH": str(tmp_path / "none.json")}
    proc = subprocess.run([sys.executable, "-m", "sdlocal.hook.run", str(script), mode], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    tr = create_trial(out)
    assert tr.training_ended() and tr.steps() == [0, 2, 4]
    names = set(tr.tensor_names())
    assert {"train-logloss", "validation-logloss", "hyperparameters/max_depth", "predictions", "labels"} <= names
    assert tr.tensor("labels").value(0).shape == (100,)  # the validation set, not dtrain
    # SHAP over dtrain: the zero-code hook takes it from the call; the script's hook was given none
    assert ("average_shap/f0" in names) == (mode == "zero-code")


@pytest.mark.interop
def test_real_smdebug_reads_the_xgboost_trial(tmp_path: Path, smdebug_python: Path) -> None:
    dtrain, dval = _data()
    hook = Hook(_config(tmp_path / "t", [{"CollectionName": n} for n in ALL], save_interval="2"),
                hyperparameters=PARAMS, train_data=dtrain, validation_data=dval)
    xgb.train(PARAMS, dtrain, 4, evals=[(dtrain, "train"), (dval, "validation")], callbacks=[hook],
              verbose_eval=False)
    hook.close()
    ours = create_trial(tmp_path / "t")
    read = textwrap.dedent("""
        import json, sys
        from smdebug.trials import create_trial
        tr = create_trial(sys.argv[1])
        out = {"steps": tr.steps(),
               "collections": {c: sorted(tr.tensor_names(collection=c)) for c in
                               ["metrics", "losses", "feature_importance", "average_shap", "trees", "labels"]},
               "val": float(tr.tensor("validation-logloss").value(2)),
               "preds": tr.tensor("predictions").value(2).tolist(),
               "depth": tr.tensor("trees/Depth").value(2).tolist(),
               "shap": tr.tensor("full_shap/f1").value(2).tolist()}
        print(json.dumps(out))
    """)
    proc = subprocess.run([str(smdebug_python), "-c", read, str(tmp_path / "t")], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["steps"] == [0, 2]
    for coll, names in got["collections"].items():
        assert names == sorted(ours.tensor_names(collection=coll)) and names, coll
    assert got["val"] == pytest.approx(float(ours.tensor("validation-logloss").value(2)))
    np.testing.assert_allclose(got["preds"], ours.tensor("predictions").value(2), rtol=1e-6)
    assert got["depth"] == ours.tensor("trees/Depth").value(2).tolist()
    # smdebug's layout: rows x (features + bias) under each name, what the census notebook slices
    np.testing.assert_allclose(got["shap"], ours.tensor("full_shap/f1").value(2), rtol=1e-6)
    assert np.asarray(got["shap"]).shape == (dtrain.num_row(), dtrain.num_col() + 1)
