"""smdebug.xgboost: smdebug 1.0's XGBoost Hook constructor, save configs and singleton on sdlocal's
XGBoost hook."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import smdebug.xgboost as smx
import xgboost as xgb

from sdlocal.hook.errors import HookConfigError, HookError
from sdlocal.trial import create_trial


def _data() -> tuple[xgb.DMatrix, xgb.DMatrix]:
    rng = np.random.default_rng(0)
    x = rng.random((120, 3))
    y = (x[:, 0] > 0.5).astype(float)
    return xgb.DMatrix(x[:80], label=y[:80]), xgb.DMatrix(x[80:], label=y[80:])


def test_constructor_as_smdebug(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SMDEBUG_CONFIG_FILE_PATH", str(tmp_path / "none.json"))
    dtrain, dval = _data()
    hook = smx.Hook(out_dir=str(tmp_path / "t"), save_config=smx.SaveConfig(save_interval=3),
                    include_collections=["metrics", "predictions", "labels", "average_shap"],
                    hyperparameters={"max_depth": 2}, train_data=dtrain, validation_data=dval)
    assert smx.get_hook() is hook and hook.include_collections == ["metrics", "predictions", "labels", "average_shap"]
    xgb.train({"max_depth": 2, "objective": "binary:logistic"}, dtrain, 7, evals=[(dval, "validation")],
              callbacks=[hook], verbose_eval=False)
    hook.close()
    tr = create_trial(tmp_path / "t")
    assert tr.steps() == [0, 3, 6]
    assert set(tr.tensor_names()) == {"validation-logloss", "predictions", "labels", "average_shap/f0",
                                      "average_shap/f1", "average_shap/f2"}
    # defaults: metrics every 10 rounds
    smx.del_hook()
    default = smx.Hook(out_dir=str(tmp_path / "d"))
    xgb.train({"objective": "binary:logistic"}, dtrain, 11, evals=[(dval, "validation")], callbacks=[default],
              verbose_eval=False)
    default.close()
    assert create_trial(tmp_path / "d").steps() == [0, 10]


def test_bad_arguments_are_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SMDEBUG_CONFIG_FILE_PATH", str(tmp_path / "none.json"))
    with pytest.raises(HookError, match="out_dir is a required argument"):
        smx.Hook()
    with pytest.raises(HookConfigError, match="include_workers"):
        smx.Hook(out_dir=str(tmp_path / "x"), include_workers="some")
    with pytest.raises(HookConfigError, match="validation_data"):
        smx.Hook(out_dir=str(tmp_path / "x"), validation_data=("/no/such.csv", "csv"))
    with pytest.raises(FileNotFoundError):
        smx.Hook.create_from_json_file(tmp_path / "missing.json")
