"""Interop with the real smdebug 1.0.34: its reader opens what our hook wrote, and its hook names
tensors exactly as ours does on the same model and config."""
from __future__ import annotations

import json
import subprocess
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from sdlocal.hook.config import HookConfig
from sdlocal.hook.pytorch import Hook
from sdlocal.trial import create_trial
from sdlocal.trial.modes import ModeKeys

pytestmark = pytest.mark.interop

READ_WITH_SMDEBUG = r"""
import json, sys
from smdebug.trials import create_trial
from smdebug.core.modes import ModeKeys
tr = create_trial(sys.argv[1])
w = tr.tensor("Sequential_fc0.weight")
print(json.dumps({
    "names": tr.tensor_names(),
    "relu": tr.tensor_names(collection="relu_output"),
    "train_steps": tr.steps(mode=ModeKeys.TRAIN),
    "eval_steps": tr.steps(mode=ModeKeys.EVAL),
    "w_sum": float(w.value(2, mode=ModeKeys.TRAIN).sum()),
    "abs_max": float(tr.tensor("layer0_relu_output_0").reduction_value(0, "max", abs=True, mode=ModeKeys.TRAIN)),
}))
"""

WRITE_WITH_SMDEBUG = r"""
import sys
from collections import OrderedDict
import torch
from torch import nn
import smdebug.pytorch as smd
torch.manual_seed(0)
model = nn.Sequential(OrderedDict(fc0=nn.Linear(4, 8), layer0_relu=nn.ReLU(), head=nn.Linear(8, 3)))
loss_fn = nn.CrossEntropyLoss()
hook = smd.Hook.create_from_json_file(sys.argv[1])
hook.register_module(model)
hook.register_loss(loss_fn)
hook.set_mode(smd.modes.TRAIN)
for _ in range(3):
    loss_fn(model(torch.randn(5, 4)), torch.randint(0, 3, (5,))).backward()
hook.close()
"""


def _config(out: Path) -> dict:
    return {
        "LocalPath": str(out),
        "HookParameters": {"save_interval": "2"},
        "CollectionConfigurations": [
            {"CollectionName": "weights"}, {"CollectionName": "biases"}, {"CollectionName": "gradients"},
            {"CollectionName": "relu_output",
             "CollectionParameters": {"include_regex": ".*relu_output", "reductions": "abs_max",
                                      "save_raw_tensor": True}},  # smdebug wants a real bool
        ],
    }


def _train_ours(out: Path) -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(OrderedDict(fc0=nn.Linear(4, 8), layer0_relu=nn.ReLU(), head=nn.Linear(8, 3)))
    loss_fn = nn.CrossEntropyLoss()
    hook = Hook(HookConfig.from_dict(_config(out)))
    hook.register_module(model)
    hook.register_loss(loss_fn)
    hook.set_mode(ModeKeys.TRAIN)
    for _ in range(3):
        loss_fn(model(torch.randn(5, 4)), torch.randint(0, 3, (5,))).backward()
    hook.set_mode(ModeKeys.EVAL)
    model(torch.randn(5, 4))
    hook.close()
    return model


def test_smdebug_reads_our_hook(tmp_path: Path, smdebug_python: Path) -> None:
    out = tmp_path / "ours"
    model = _train_ours(out)
    proc = subprocess.run([str(smdebug_python), "-c", READ_WITH_SMDEBUG, str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    ours = create_trial(out)
    assert got["names"] == ours.tensor_names()
    assert got["relu"] == ["layer0_relu_output_0"]
    assert got["train_steps"] == [0, 2] and got["eval_steps"] == [0]
    assert got["w_sum"] == pytest.approx(float(model.fc0.weight.detach().sum()), rel=1e-5)
    relu = ours.tensor("layer0_relu_output_0").value(0, mode=ModeKeys.TRAIN)
    assert got["abs_max"] == pytest.approx(float(np.abs(relu).max()))


def test_same_names_as_smdebugs_hook(tmp_path: Path, smdebug_python: Path) -> None:
    theirs = tmp_path / "theirs"
    cfg = tmp_path / "debughookconfig.json"
    cfg.write_text(json.dumps(_config(theirs)))
    proc = subprocess.run([str(smdebug_python), "-c", WRITE_WITH_SMDEBUG, str(cfg)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    ours = tmp_path / "ours"
    _train_ours(ours)
    t_theirs, t_ours = create_trial(theirs), create_trial(ours)
    assert t_ours.tensor_names() == t_theirs.tensor_names()
    assert t_ours.steps(mode=ModeKeys.TRAIN) == t_theirs.steps(mode=ModeKeys.TRAIN)
    for name in ("relu_output", "weights", "gradients", "losses"):
        assert t_ours.tensor_names(collection=name) == t_theirs.tensor_names(collection=name), name
    index = "index/000000000/000000000002_worker_0.json"
    names = [[p["tensorname"] for p in json.loads((root / index).read_text())["tensor_payload"]]
             for root in (theirs, ours)]
    assert sorted(names[0]) == sorted(names[1])


NEW_COLLECTIONS = ("relu_input", "relu_output", "tanh_input", "sigmoid_input", "labels", "predictions", "inputs",
                   "outputs", "input_image", "input_sequence")

READ_COLLECTIONS_WITH_SMDEBUG = r"""
import json, sys
from smdebug.trials import create_trial
tr = create_trial(sys.argv[1])
names = sys.argv[2].split(",")
print(json.dumps({
    "members": {c: sorted(tr.tensor_names(collection=c)) for c in names},
    "labels": tr.tensor("CrossEntropyLoss_labels").value(1).tolist(),
    "predictions": tr.tensor("CrossEntropyLoss_predictions").value(1).tolist(),
    "relu_mean": float(tr.tensor("1_output_0").reduction_value(1, "mean")),
}))
"""


def test_smdebug_reads_the_new_collections(tmp_path: Path, smdebug_python: Path) -> None:
    out = tmp_path / "ours"
    torch.manual_seed(0)
    model, loss_fn = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 3)), nn.CrossEntropyLoss()
    hook = Hook(HookConfig.from_dict({
        "LocalPath": str(out), "HookParameters": {"save_interval": "1"},
        "CollectionConfigurations": [{"CollectionName": n} for n in NEW_COLLECTIONS]}))
    hook.register_module(model)
    hook.register_loss(loss_fn)
    for _ in range(2):
        x, y = torch.randn(8, 16), torch.randint(0, 3, (8,))
        loss_fn(model(x), y).backward()
    hook.close()
    proc = subprocess.run([str(smdebug_python), "-c", READ_COLLECTIONS_WITH_SMDEBUG, str(out),
                           ",".join(NEW_COLLECTIONS)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    ours = create_trial(out)
    assert got["members"] == {c: ours.tensor_names(collection=c) for c in NEW_COLLECTIONS}
    assert got["members"]["relu_output"] == ["1_output_0"]
    assert got["members"]["labels"] == ["CrossEntropyLoss_labels"]
    assert got["members"]["inputs"] == ["Sequential_input_0"]
    assert got["labels"] == y.tolist()
    assert got["predictions"] == model(x).argmax(dim=1).tolist()
    assert got["relu_mean"] == pytest.approx(float(model[1](model[0](x)).detach().mean()), rel=1e-5)
