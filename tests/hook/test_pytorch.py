"""The Hook's explicit API in-process, read back with trial.create_trial."""
from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from sdlocal.hook.config import HookConfig
from sdlocal.hook.errors import HookError, HookWriteError
from sdlocal.hook.pytorch import Hook
from sdlocal.trial import create_trial
from sdlocal.trial.modes import ModeKeys


def _model() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(OrderedDict(fc0=nn.Linear(4, 8), layer0_relu=nn.ReLU(), head=nn.Linear(8, 3)))


def _config(out: Path, hook_params: dict, *collections: tuple[str, dict]) -> HookConfig:
    return HookConfig.from_dict({
        "LocalPath": str(out),
        "HookParameters": hook_params,
        "CollectionConfigurations": [{"CollectionName": n, "CollectionParameters": p} for n, p in collections],
    })


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(5, 4), torch.randint(0, 3, (5,))


def test_explicit_api_saves_what_smdebug_would(tmp_path: Path) -> None:
    out = tmp_path / "trial"
    cfg = _config(out, {"save_interval": "2"}, ("weights", {}), ("biases", {}), ("gradients", {}),
                  ("relu_output", {"include_regex": ".*relu_output"}))
    model, loss_fn = _model(), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    hook = Hook(cfg)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    hook.set_mode(ModeKeys.TRAIN)
    weights, grads, losses = {}, {}, {}
    for step in range(5):
        x, y = _batch()
        weights[step] = model.fc0.weight.detach().clone()
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        grads[step] = model.fc0.weight.grad.detach().clone()
        losses[step] = loss.item()
        opt.step()
        hook.save_scalar("lr", 0.5)
        hook.save_tensor("my_tensor", torch.full((2,), float(step)), "custom")
    hook.set_mode(ModeKeys.EVAL)
    with torch.no_grad():
        for _ in range(2):
            loss_fn(model(x), y)
    hook.close()

    trial = create_trial(out)
    assert trial.training_ended()
    # TRAIN 1 and 3 hold only the scalar; EVAL 1 (global step 6) saves nothing.
    assert trial.steps() == list(range(6))
    assert trial.steps(mode=ModeKeys.TRAIN) == [0, 1, 2, 3, 4]
    assert trial.steps(mode=ModeKeys.EVAL) == [0]
    w = trial.tensor("Sequential_fc0.weight")
    assert w.steps(mode=ModeKeys.TRAIN) == [0, 2, 4]
    for s in (0, 2, 4):
        np.testing.assert_array_equal(w.value(s, mode=ModeKeys.TRAIN), weights[s].numpy())
        np.testing.assert_array_equal(trial.tensor("gradient/Sequential_fc0.weight").value(s, mode=ModeKeys.TRAIN),
                                      grads[s].numpy())
        assert trial.tensor("CrossEntropyLoss_output_0").value(s, mode=ModeKeys.TRAIN) == pytest.approx(losses[s])
    # EVAL step 0 sees the final weights, and never gradients.
    np.testing.assert_array_equal(w.value(0, mode=ModeKeys.EVAL), model.fc0.weight.detach().numpy())
    assert trial.tensor("gradient/Sequential_fc0.weight").steps(mode=ModeKeys.EVAL) == []
    assert trial.tensor("layer0_relu_output_0").value(0, mode=ModeKeys.EVAL).shape == (5, 8)
    # save_scalar: every step; save_tensor: when its collection is saved.
    assert trial.tensor("scalar/lr").steps() == [0, 1, 2, 3, 4]
    assert trial.tensor("my_tensor").steps() == [0, 2, 4]
    np.testing.assert_array_equal(trial.tensor("my_tensor").value(4), [4.0, 4.0])

    names = json.loads((out / "collections/000000000/worker_0_collections.json").read_text())
    colls = names["collections"]
    assert names["_meta"] == {"num_workers": 1}
    assert colls["weights"]["tensor_names"] == ["Sequential_fc0.weight", "Sequential_head.weight"]
    assert colls["gradients"]["tensor_names"] == ["gradient/Sequential_fc0.bias", "gradient/Sequential_fc0.weight",
                                                  "gradient/Sequential_head.bias", "gradient/Sequential_head.weight"]
    assert colls["losses"]["tensor_names"] == ["CrossEntropyLoss_output_0"]
    assert colls["relu_output"]["tensor_names"] == ["layer0_relu_output_0"]
    assert colls["custom"]["tensor_names"] == ["my_tensor"]
    assert trial.tensor_names(collection="relu_output") == ["layer0_relu_output_0"]


def test_unsaved_steps_write_nothing_and_mode_follows_model_training(tmp_path: Path) -> None:
    out = tmp_path / "trial"
    cfg = _config(out, {"save_interval": "1000", "eval.save_steps": "1"}, ("weights", {}))
    model, loss_fn = _model(), nn.CrossEntropyLoss()
    hook = Hook(cfg)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    for _ in range(4):
        x, y = _batch()
        loss_fn(model(x), y).backward()
    model.eval()
    for _ in range(3):
        model(x)
    hook.close()
    trial = create_trial(out)
    # TRAIN 0 and EVAL 0 (interval), EVAL 1 (save_steps); nothing else.
    assert trial.steps() == [0, 4, 5]
    assert [trial.mode_modestep(s) for s in trial.steps()] == [
        (ModeKeys.TRAIN, 0), (ModeKeys.EVAL, 0), (ModeKeys.EVAL, 1)]
    assert sorted(p.name for p in (out / "index/000000000").iterdir()) == [
        "000000000000_worker_0.json", "000000000004_worker_0.json", "000000000005_worker_0.json"]


def test_module_called_twice_numbers_its_outputs(tmp_path: Path) -> None:
    class Twice(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(3, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(self.fc(x))

    out = tmp_path / "trial"
    hook = Hook(_config(out, {"save_interval": "1"}, ("fc_out", {"include_regex": "^fc_output"})))
    model = Twice()
    hook.register_module(model)
    x = torch.randn(2, 3)
    model(x)
    model(x)
    hook.close()
    trial = create_trial(out)
    assert trial.tensor_names() == ["fc_output_0", "fc_output_1"]
    first = model.fc(x).detach().numpy()
    np.testing.assert_allclose(trial.tensor("fc_output_0").value(1), first, rtol=1e-6)
    np.testing.assert_allclose(trial.tensor("fc_output_1").value(1), model.fc(torch.from_numpy(first)).detach(),
                               rtol=1e-6)


def test_reductions_only(tmp_path: Path) -> None:
    out = tmp_path / "trial"
    hook = Hook(_config(out, {"save_interval": "1"}, ("weights", {"reductions": "mean,abs_max,l2_norm"})))
    model = _model()
    hook.register_module(model)
    model(torch.randn(2, 4))
    hook.close()
    index = json.loads((out / "index/000000000/000000000000_worker_0.json").read_text())
    saved = {p["tensorname"] for p in index["tensor_payload"]}
    assert "smdebug/reductions/abs_max/Sequential_fc0.weight" in saved
    assert "smdebug/reductions/l2/Sequential_head.weight" in saved
    assert "Sequential_fc0.weight" not in saved  # reductions without save_raw_tensor
    t = create_trial(out).tensor("Sequential_fc0.weight")
    w = model.fc0.weight.detach()
    assert t.reduction_value(0, "max", abs=True) == pytest.approx(float(w.abs().max()))
    assert t.reduction_value(0, "mean") == pytest.approx(float(w.mean()))


def test_write_failure_surfaces_at_close(tmp_path: Path) -> None:
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("")
    hook = Hook(_config(blocker / "trial", {"save_interval": "1"}, ("weights", {})))
    model = _model()
    hook.register_module(model)
    model(torch.randn(2, 4))
    model(torch.randn(2, 4))
    with pytest.raises(HookWriteError):
        hook.close()
    hook.close()  # idempotent


def test_register_twice_and_bad_scalar(tmp_path: Path) -> None:
    hook = Hook(_config(tmp_path / "t", {}))
    hook.register_module(_model())
    with pytest.raises(HookError):
        hook.register_module(_model())
    with pytest.raises(HookError, match="single value"):
        hook.save_scalar("x", [1.0, 2.0])
    hook.close()


def test_the_step_record_counts_steps_run_and_steps_each_collection_was_scheduled(tmp_path: Path) -> None:
    # the SDK's rule collections: save_interval 500 (gradients); losses every step; 50 steps run
    out = tmp_path / "trial"
    cfg = _config(out, {"save_interval": "500"}, ("gradients", {"save_interval": "500"}),
                  ("losses", {"save_interval": "1"}), ("weights", {"train.save_steps": "3,7"}))
    model, loss_fn = _model(), nn.CrossEntropyLoss()
    hook = Hook(cfg)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    for _ in range(40):
        x, y = _batch()
        loss_fn(model(x), y).backward()
    model.eval()
    for _ in range(10):
        loss_fn(model(x), y)
    hook.close()
    record = json.loads((out / ".sdlocal-steps.json").read_text())
    assert record["steps"] == 50 and record["mode_steps"] == {"TRAIN": 40, "EVAL": 10}
    scheduled = record["scheduled_steps"]
    assert scheduled["losses"] == 50
    # TRAIN step 0 and EVAL step 0 (gradients are TRAIN-only: not scheduled in EVAL)
    assert scheduled["gradients"] == 1
    # TRAIN 0 (the 500 interval), 3 and 7 (save_steps), EVAL 0: as smdebug, steps and interval both count
    assert scheduled["weights"] == 4
    # the trial agrees
    trial = create_trial(out)
    grads = [n for n in trial.tensor_names() if "gradient" in n]
    assert grads and all(trial.tensor(n).steps() == [0] for n in grads)
    weights = trial.tensor_names(collection="weights")
    assert weights and all(len(trial.tensor(n).steps()) == 4 for n in weights)
    # the steps that saved a tensor of each collection: here every scheduled one
    saved = record["saved_steps"]
    assert (saved["losses"], saved["gradients"], saved["weights"]) == (50, 1, 4)


def test_the_step_record_counts_saved_steps_apart_from_scheduled_ones(tmp_path: Path) -> None:
    # a training that gives the hook no loss (scored without one, nothing backpropagated): scheduled, never saved
    out = tmp_path / "trial"
    hook = Hook(_config(out, {"save_interval": "1"}, ("losses", {}), ("weights", {})))
    model = _model()
    hook.register_module(model)
    for _ in range(6):
        x, _y = _batch()
        with torch.no_grad():
            model(x)
    hook.close()
    record = json.loads((out / ".sdlocal-steps.json").read_text())
    assert record["scheduled_steps"]["losses"] == 6 and record["saved_steps"]["losses"] == 0
    assert record["saved_steps"]["weights"] == 6
