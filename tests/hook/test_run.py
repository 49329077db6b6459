"""End to end: `python -m sdlocal.hook.run examples/train.py ...` in a subprocess, read with create_trial."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from sdlocal.trial import create_trial
from sdlocal.trial.modes import ModeKeys

REPO = Path(__file__).resolve().parents[2]
TRAIN = REPO / "examples" / "train.py"
LR = 0.05

pytestmark = pytest.mark.slow


def _run(tmp_path: Path, config: dict | None, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "SM_MODEL_DIR": str(tmp_path / "model")}
    cfg_path = tmp_path / "debughookconfig.json"
    if config is not None:
        cfg_path.write_text(json.dumps(config))
    env["SMDEBUG_CONFIG_FILE_PATH"] = str(cfg_path)
    return subprocess.run([sys.executable, "-m", "sdlocal.hook.run", str(TRAIN), "--log-every", "0", *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def _config(out: Path, **hook_params: str) -> dict:
    return {
        "LocalPath": str(out),
        "HookParameters": {"save_interval": "1", **hook_params},
        "CollectionConfigurations": [
            {"CollectionName": "weights"}, {"CollectionName": "biases"}, {"CollectionName": "gradients"},
            {"CollectionName": "losses"},
            {"CollectionName": "relu_output",
             "CollectionParameters": {"include_regex": ".*relu_output", "reductions": "mean,abs_max",
                                      "save_raw_tensor": "true"}},
        ],
    }


def test_unmodified_script_is_hooked(tmp_path: Path) -> None:
    out = tmp_path / "tensors"
    proc = _run(tmp_path, _config(out), "--steps", "12", "--eval-every", "6", "--eval-batches", "2",
                "--lr", str(LR))
    assert proc.returncode == 0, proc.stderr
    trial = create_trial(out)
    assert trial.training_ended() and trial.num_workers == 1 and trial.workers() == ["worker_0"]
    # 12 TRAIN steps, an EVAL pass of 2 batches after TRAIN steps 5 and 11.
    assert trial.steps() == list(range(16))
    assert trial.steps(mode=ModeKeys.TRAIN) == list(range(12))
    assert trial.steps(mode=ModeKeys.EVAL) == [0, 1, 2, 3]
    assert trial.mode_modestep(6) == (ModeKeys.EVAL, 0)
    params = ["fc0.weight", "fc0.bias", "fc1.weight", "fc1.bias", "head.weight", "head.bias"]
    expected = {f"Sequential_{p}" for p in params} | {f"gradient/Sequential_{p}" for p in params}
    expected |= {"CrossEntropyLoss_output_0", "layer0_relu_output_0", "layer1_relu_output_0"}
    assert set(trial.tensor_names()) == expected
    assert trial.tensor_names(collection="relu_output") == ["layer0_relu_output_0", "layer1_relu_output_0"]
    assert trial.tensor_names(collection="losses") == ["CrossEntropyLoss_output_0"]

    loss = trial.tensor("CrossEntropyLoss_output_0")
    assert loss.steps() == list(range(16))
    train_losses = [float(loss.value(s, mode=ModeKeys.TRAIN)) for s in range(12)]
    assert train_losses[-1] < train_losses[0]

    final = torch.load(tmp_path / "model" / "model.pt")
    for p in params:
        w = trial.tensor(f"Sequential_{p}")
        g = trial.tensor(f"gradient/Sequential_{p}")
        assert g.steps(mode=ModeKeys.EVAL) == []  # gradients: TRAIN only
        # The last EVAL step runs after all training: it saw the final weights.
        np.testing.assert_array_equal(w.value(3, mode=ModeKeys.EVAL), final[p].numpy())
        # TRAIN step 11 saved the weights before its SGD update: w_final = w_11 - lr * g_11.
        np.testing.assert_allclose(w.value(11, mode=ModeKeys.TRAIN) - LR * g.value(11, mode=ModeKeys.TRAIN),
                                   final[p].numpy(), rtol=1e-5, atol=1e-6)

    relu = trial.tensor("layer0_relu_output_0")
    raw = relu.value(3, mode=ModeKeys.TRAIN)
    assert raw.shape == (64, 64) and raw.min() >= 0
    assert relu.reduction_value(3, "mean", mode=ModeKeys.TRAIN) == pytest.approx(float(raw.mean()), rel=1e-5)
    assert relu.reduction_value(3, "max", mode=ModeKeys.TRAIN, abs=True) == pytest.approx(float(raw.max()))
    index = json.loads((out / "index/000000000/000000000003_worker_0.json").read_text())
    assert "smdebug/reductions/abs_max/layer0_relu_output_0" in {p["tensorname"] for p in index["tensor_payload"]}


def test_large_lr_explodes_to_nan(tmp_path: Path) -> None:
    out = tmp_path / "tensors"
    proc = _run(tmp_path, _config(out, save_interval="5"), "--steps", "20", "--lr", "1e5")
    assert proc.returncode == 0, proc.stderr
    trial = create_trial(out)
    loss = trial.tensor("CrossEntropyLoss_output_0")
    assert loss.steps() == [0, 5, 10, 15]
    assert np.isfinite(loss.value(0))
    assert not np.isfinite(loss.value(15))
    assert not np.isfinite(trial.tensor("Sequential_fc0.weight").value(15)).all()


def test_crash_keeps_the_steps_written_before(tmp_path: Path) -> None:
    out = tmp_path / "tensors"
    proc = _run(tmp_path, _config(out), "--steps", "20", "--fail-at-step", "5")
    assert proc.returncode != 0
    assert "failing on purpose at step 5" in proc.stderr
    trial = create_trial(out)
    assert trial.steps(mode=ModeKeys.TRAIN) == [0, 1, 2, 3, 4]
    assert trial.tensor("gradient/Sequential_head.weight").steps() == [0, 1, 2, 3, 4]
    assert trial.training_ended()


def test_no_config_runs_unchanged_and_bad_config_fails(tmp_path: Path) -> None:
    proc = _run(tmp_path, None, "--steps", "3")
    assert proc.returncode == 0, proc.stderr
    assert "done:" in proc.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]

    proc = _run(tmp_path, {"HookParameters": {"save_interval": "often"}}, "--steps", "3")
    assert proc.returncode == 2
    assert "HookParameters.save_interval" in proc.stderr


def test_unmodified_script_saves_labels_predictions_and_activations(tmp_path: Path) -> None:
    import importlib.util

    out = tmp_path / "tensors"
    config = {
        "LocalPath": str(out),
        "HookParameters": {"save_interval": "1"},
        "CollectionConfigurations": [{"CollectionName": n} for n in (
            "labels", "predictions", "relu_input", "inputs", "input_image")],
    }
    proc = _run(tmp_path, config, "--steps", "3", "--eval-every", "3", "--eval-batches", "1")
    assert proc.returncode == 0, proc.stderr
    trial = create_trial(out)
    assert trial.tensor_names(collection="labels") == ["CrossEntropyLoss_labels"]
    assert trial.tensor_names(collection="predictions") == ["CrossEntropyLoss_predictions"]
    assert trial.tensor_names(collection="relu_input") == ["layer0_relu_input_0", "layer1_relu_input_0"]
    assert trial.tensor_names(collection="inputs") == ["Sequential_input_0"]
    assert trial.tensor_names(collection="input_image") == []  # 2-D inputs are no images
    # The loss is found during its first call: step 0 already has its labels (the script's data).
    spec = importlib.util.spec_from_file_location("example_train", TRAIN)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    x, y = example.make_data(2048, 16, 3, torch.Generator().manual_seed(0))
    labels = trial.tensor("CrossEntropyLoss_labels")
    assert labels.steps(mode=ModeKeys.TRAIN) == [0, 1, 2] and labels.steps(mode=ModeKeys.EVAL) == [0]
    np.testing.assert_array_equal(labels.value(0, mode=ModeKeys.TRAIN), y[:64].numpy())
    np.testing.assert_array_equal(trial.tensor("Sequential_input_0").value(1, mode=ModeKeys.TRAIN), x[64:128].numpy())
    preds = trial.tensor("CrossEntropyLoss_predictions").value(0, mode=ModeKeys.EVAL)
    assert preds.shape == (64,) and set(preds.tolist()) <= {0, 1, 2}
