"""hook/_job_paths.py: SageMaker's container paths given to a hook (`/opt/ml/output/tensors`, the
TensorBoard folder, any `/opt/ml/...`) are the job's folders when the job's /opt/ml is a job folder
of this host (the process runtime); unchanged in a container and outside a job. Both smdebug hooks
(PyTorch and XGBoost) and both engines go through it, and nothing reaches this host's /opt/ml."""
from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import xgboost as xgb

from sdlocal.hook import _current
from sdlocal.hook._job_paths import job_path, job_root, resolve_out_dir
from sdlocal.hook.config import HookConfig
from sdlocal.hook.errors import HookError
from sdlocal.trial import create_trial
from sdlocal.trial.smdebug_shim import use_sdlocal_smdebug

use_sdlocal_smdebug()

OPT_ML = Path("/opt/ml")


def opt_ml_snapshot() -> set[str] | None:
    """Every path under this host's /opt/ml (None when it does not exist)."""
    if not OPT_ML.exists():
        return None
    return {str(p) for p in OPT_ML.rglob("*")} | {str(OPT_ML)}


@pytest.fixture
def job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A job folder laid out as the process runtime lays it out, with the variables it sets."""
    root = tmp_path / "jobs" / "j"
    config = root / "input" / "config"
    config.mkdir(parents=True)
    (config / "debughookconfig.json").write_text(json.dumps({"LocalPath": str(root / "output" / "tensors")}))
    (config / "tensorboardoutputconfig.json").write_text(json.dumps({"LocalPath": str(root / "output" / "tb")}))
    monkeypatch.setenv("SMDEBUG_CONFIG_FILE_PATH", str(config / "debughookconfig.json"))
    monkeypatch.setenv("TENSORBOARD_CONFIG_FILE_PATH", str(config / "tensorboardoutputconfig.json"))
    monkeypatch.setenv("SM_INPUT_DIR", str(root / "input"))
    monkeypatch.setenv("SM_OUTPUT_DIR", str(root / "output"))
    monkeypatch.setenv("SM_MODEL_DIR", str(root / "model"))
    _current.set_current(None)
    before = opt_ml_snapshot()
    yield root
    _current.set_current(None)
    assert opt_ml_snapshot() == before, "something was written to this host's /opt/ml"


def test_container_paths_are_the_jobs_folders(job: Path) -> None:
    assert job_root() == str(job)
    assert job_path("/opt/ml/output/tensors") == str(job / "output" / "tensors")
    assert job_path("/opt/ml/output/tensors/") == str(job / "output" / "tensors")
    assert job_path("/opt/ml/output/tensors/sub") == str(job / "output" / "tensors" / "sub")
    assert job_path("/opt/ml/output/tensorboard") == str(job / "output" / "tb")  # the config's LocalPath
    assert job_path("/opt/ml/model/debug") == str(job / "model" / "debug")
    assert job_path("/opt/ml/output/../model") == str(job / "model")
    assert job_path("/opt/ml") == str(job)
    for other in ("/opt/mlx/t", "/tmp/t", "relative/t", str(job / "output" / "tensors")):
        assert job_path(other) == other


def test_without_a_tensorboard_config_the_same_path_in_the_job(job: Path) -> None:
    (job / "input" / "config" / "tensorboardoutputconfig.json").unlink()
    assert job_path("/opt/ml/output/tensorboard") == str(job / "output" / "tensorboard")


def test_in_a_container_and_outside_a_job_paths_are_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("SM_INPUT_DIR", "SM_OUTPUT_DIR", "SM_MODEL_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SMDEBUG_CONFIG_FILE_PATH", str(tmp_path / "none.json"))
    monkeypatch.setenv("TENSORBOARD_CONFIG_FILE_PATH", str(tmp_path / "none.json"))
    assert job_root() is None and job_path("/opt/ml/output/tensors") == "/opt/ml/output/tensors"
    # the docker runtime: the job's /opt/ml is /opt/ml, its configs name container paths
    cfg = tmp_path / "debughookconfig.json"
    cfg.write_text(json.dumps({"LocalPath": "/opt/ml/output/tensors"}))
    monkeypatch.setenv("SMDEBUG_CONFIG_FILE_PATH", str(cfg))
    monkeypatch.setenv("SM_INPUT_DIR", "/opt/ml/input")
    assert job_root() == "/opt/ml"
    assert job_path("/opt/ml/output/tensors") == "/opt/ml/output/tensors"
    assert job_path("/opt/ml/model/x") == "/opt/ml/model/x"


def test_out_dir_rules(job: Path, caplog: pytest.LogCaptureFixture) -> None:
    import logging

    log = logging.getLogger("test")
    assert resolve_out_dir(None, log) == job / "output" / "tensors"
    with caplog.at_level(logging.INFO, logger="test"):
        assert resolve_out_dir("/opt/ml/output/tensors", log) == job / "output" / "tensors"
    assert "container path" in caplog.text and "not uploaded" not in caplog.text
    with caplog.at_level(logging.INFO, logger="test"):
        assert resolve_out_dir("/opt/ml/output/mine", log) == job / "output" / "mine"
    assert "not uploaded" in caplog.text
    with pytest.raises(HookError, match="local folders only"):
        resolve_out_dir("s3://b/p", log)
    (job / "output" / "tensors").mkdir(parents=True)
    (job / "output" / "tensors" / "training_job_end.ts").write_text("")
    with pytest.raises(HookError, match="finished trial"):
        resolve_out_dir("/opt/ml/output/tensors", log)


def _data() -> tuple[xgb.DMatrix, xgb.DMatrix]:
    rng = np.random.default_rng(0)
    x = rng.random((120, 3))
    y = (x[:, 0] > 0.5).astype(float)
    return xgb.DMatrix(x[:80], label=y[:80]), xgb.DMatrix(x[80:], label=y[80:])


def test_smdebug_xgboost_hook_writes_into_the_job(job: Path) -> None:
    import smdebug.xgboost as smx

    dtrain, dval = _data()
    hook = smx.Hook(out_dir="/opt/ml/output/tensors", export_tensorboard=True,
                    tensorboard_dir="/opt/ml/output/tensorboard", save_config=smx.SaveConfig(save_interval=2),
                    include_collections=["metrics", "trees"], train_data=dtrain, validation_data=dval)
    assert hook.out_dir == job / "output" / "tensors" and hook.tensorboard_dir == str(job / "output" / "tb")
    xgb.train({"max_depth": 2, "objective": "binary:logistic"}, dtrain, 5, evals=[(dval, "validation")],
              callbacks=[hook], verbose_eval=False)
    hook.close()
    trial = create_trial(job / "output" / "tensors")
    assert trial.steps() == [0, 2, 4] and "trees/Depth" in trial.tensor_names()
    assert any(p.name.startswith("events.out.tfevents") for p in (job / "output" / "tb").iterdir())


def test_smdebug_pytorch_hook_writes_into_the_job(job: Path) -> None:
    import smdebug.pytorch as smd
    import torch

    hook = smd.Hook(out_dir="/opt/ml/output/tensors", tensorboard_dir="/opt/ml/model/tb",
                    save_config=smd.SaveConfig(save_interval=1))
    assert hook.out_dir == job / "output" / "tensors" and hook.tensorboard_dir == str(job / "model" / "tb")
    model = torch.nn.Linear(3, 1)
    hook.register_module(model)
    loss_fn = torch.nn.MSELoss()
    hook.register_loss(loss_fn)
    for _ in range(2):
        loss_fn(model(torch.randn(4, 3)), torch.zeros(4, 1)).backward()
    hook.close()
    assert create_trial(job / "output" / "tensors").steps() == [0, 1]


def test_the_engines_map_what_they_are_given(job: Path) -> None:
    """A hook config naming SageMaker's paths (LocalPath left at its default) writes into the job."""
    from sdlocal.hook.xgboost import Hook as XGBHook

    config = HookConfig.from_dict({"HookParameters": {"save_interval": "1"}}, framework="xgboost")
    assert config.local_path == "/opt/ml/output/tensors"
    hook = XGBHook(config, tensorboard_dir="/opt/ml/output/tensorboard")
    assert hook.out_dir == job / "output" / "tensors" and hook.tensorboard_dir == str(job / "output" / "tb")
    dtrain, dval = _data()
    xgb.train({"objective": "binary:logistic"}, dtrain, 2, evals=[(dval, "validation")], callbacks=[hook],
              verbose_eval=False)
    hook.close()
    assert create_trial(job / "output" / "tensors").steps() == [0, 1]
    assert os.path.isdir(job / "output" / "tb")
