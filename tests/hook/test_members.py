"""Collections whose members the hook finds by name AND by module type or role (hook._members):
activations, model inputs/outputs, input_image, input_sequence, labels/predictions."""
from __future__ import annotations

import json
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

ACTIVATIONS = ("relu_input", "relu_output", "tanh_input", "tanh_output", "sigmoid_input", "sigmoid_output")


def _config(out: Path, *names: str, interval: str = "1", **params: dict) -> HookConfig:
    return HookConfig.from_dict({
        "LocalPath": str(out),
        "HookParameters": {"save_interval": interval},
        "CollectionConfigurations": [{"CollectionName": n, "CollectionParameters": params.get(n, {})}
                                     for n in names],
    })


def _collections_file(out: Path) -> dict:
    return json.loads((out / "collections/000000000/worker_0_collections.json").read_text())["collections"]


class _Capture:
    """Records what each module really saw, independently of the hook."""

    def __init__(self, model: nn.Module) -> None:
        self.seen: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        for name, m in model.named_modules():
            if name:
                m.register_forward_hook(self._make(name))

    def _make(self, name: str):  # noqa: ANN202
        def on(module: nn.Module, inputs: tuple, output: torch.Tensor) -> None:
            self.seen[name] = (inputs[0].detach().clone(), output.detach().clone())

        return on


def _activation_model() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(OrderedDict(
        fc0=nn.Linear(6, 8), layer0_relu=nn.ReLU(),       # by name and by type
        fc1=nn.Linear(8, 8), act=nn.ReLU6(),              # by type only
        fc2=nn.Linear(8, 8), gate_tanh=nn.Hardtanh(),     # by name only (not an nn.Tanh)
        fc3=nn.Linear(8, 8), squash=nn.Tanh(),            # by type
        fc4=nn.Linear(8, 8), leaky=nn.LeakyReLU(),        # neither: LeakyReLU is not collected
        fc5=nn.Linear(8, 8), layer1_sigmoid=nn.Sigmoid(),  # by name and type
        head=nn.Linear(8, 3),
    ))


def test_activation_collections_by_name_and_by_type(tmp_path: Path) -> None:
    out = tmp_path / "t"
    model = _activation_model()
    cap = _Capture(model)
    hook = Hook(_config(out, *ACTIVATIONS))
    hook.register_module(model)
    x = torch.randn(5, 6)
    model(x)
    hook.close()
    trial = create_trial(out)
    expected = {
        "relu_input": ["act_input_0", "layer0_relu_input_0"],
        "relu_output": ["act_output_0", "layer0_relu_output_0"],
        "tanh_input": ["gate_tanh_input_0", "squash_input_0"],
        "tanh_output": ["gate_tanh_output_0", "squash_output_0"],
        "sigmoid_input": ["layer1_sigmoid_input_0"],
        "sigmoid_output": ["layer1_sigmoid_output_0"],
    }
    colls = _collections_file(out)
    for name, members in expected.items():
        assert trial.tensor_names(collection=name) == members, name
        assert colls[name]["tensor_names"] == members, name
    assert not any(n.startswith(("leaky", "fc", "head")) for n in trial.tensor_names())
    for module in ("layer0_relu", "act", "gate_tanh", "squash", "layer1_sigmoid"):
        seen_in, seen_out = cap.seen[module]
        np.testing.assert_array_equal(trial.tensor(f"{module}_input_0").value(0), seen_in.numpy())
        np.testing.assert_array_equal(trial.tensor(f"{module}_output_0").value(0), seen_out.numpy())


def test_plain_sequential_relu_feeds_relu_output(tmp_path: Path) -> None:
    out = tmp_path / "t"
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    hook = Hook(_config(out, "relu_output", relu_output={"include_regex": ".*relu_output"}))
    hook.register_module(model)
    x = torch.randn(7, 4)
    model(x)
    hook.close()
    trial = create_trial(out)
    assert trial.tensor_names(collection="relu_output") == ["1_output_0"]
    np.testing.assert_array_equal(trial.tensor("1_output_0").value(0), model[1](model[0](x)).detach().numpy())


def _hook_counts(model: nn.Module, loss: nn.Module) -> dict[str, int]:
    counts = {name or "<model>": len(m._forward_hooks) for name, m in model.named_modules()}
    counts["<loss>"] = len(loss._forward_hooks)
    return counts


@pytest.mark.parametrize(("collections", "hooked"), [
    ((), {"<loss>": 1}),  # the loss output (losses is always saved), nothing else
    (("weights", "gradients"), {"<loss>": 1}),
    (("relu_output",), {"layer0_relu": 1, "act": 1, "<loss>": 1}),
    (("tanh_input",), {"gate_tanh": 1, "squash": 1, "<loss>": 1}),
    (("labels",), {"<loss>": 2}),
    (("inputs", "input_image"), {"<model>": 1, "<loss>": 1}),
])
def test_forward_hooks_only_where_a_saved_collection_needs_them(tmp_path: Path, collections: tuple[str, ...],
                                                                hooked: dict[str, int]) -> None:
    model, loss = _activation_model(), nn.CrossEntropyLoss()
    hook = Hook(_config(tmp_path / "t", *collections))
    hook.register_module(model)
    hook.register_loss(loss)
    assert {k: v for k, v in _hook_counts(model, loss).items() if v} == hooked
    hook.close()
    assert not any(_hook_counts(model, loss).values())  # close() removes them


def test_labels_and_predictions_of_a_classifier(tmp_path: Path) -> None:
    out = tmp_path / "t"
    torch.manual_seed(1)
    model, loss_fn = nn.Sequential(nn.Linear(4, 3)), nn.CrossEntropyLoss()
    hook = Hook(_config(out, "labels", "predictions", interval="2"))
    hook.register_module(model)
    hook.register_loss(loss_fn)
    batches = [(torch.randn(6, 4), torch.randint(0, 3, (6,))) for _ in range(4)]
    logits = {}
    for step, (x, y) in enumerate(batches[:3]):
        logits[step] = model(x)
        loss_fn(logits[step], y).backward()
    model.eval()
    with torch.no_grad():
        x, y = batches[3]
        logits[3] = model(x)
        loss_fn(logits[3], y)
    hook.close()

    trial = create_trial(out)
    assert trial.tensor_names(collection="labels") == ["CrossEntropyLoss_labels"]
    assert trial.tensor_names(collection="predictions") == ["CrossEntropyLoss_predictions"]
    # ClassImbalance's default regexes find them; the losses collection does not take them.
    assert trial.tensor_names(regex=".*labels") == ["CrossEntropyLoss_labels"]
    assert trial.tensor_names(regex=".*predictions") == ["CrossEntropyLoss_predictions"]
    assert trial.tensor_names(collection="losses") == ["CrossEntropyLoss_output_0"]
    labels, preds = trial.tensor("CrossEntropyLoss_labels"), trial.tensor("CrossEntropyLoss_predictions")
    assert labels.steps(mode=ModeKeys.TRAIN) == [0, 2] and labels.steps(mode=ModeKeys.EVAL) == [0]
    for step, mode, i in ((0, ModeKeys.TRAIN, 0), (2, ModeKeys.TRAIN, 2), (0, ModeKeys.EVAL, 3)):
        got = labels.value(step, mode=mode)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, batches[i][1].numpy())
        np.testing.assert_array_equal(preds.value(step, mode=mode), logits[i].argmax(dim=1).numpy())


def test_two_loss_calls_in_a_step_append_rows(tmp_path: Path) -> None:
    out = tmp_path / "t"
    model, loss_fn = nn.Linear(4, 3), nn.CrossEntropyLoss()
    hook = Hook(_config(out, "labels", "predictions"))
    hook.register_module(model)
    hook.register_loss(loss_fn)
    x = torch.randn(6, 4)
    y = torch.tensor([0, 1, 2, 2, 1, 0])
    scores = model(x)
    loss_fn(scores[:4], y[:4])
    loss_fn(scores[4:], y[4:])
    hook.close()
    trial = create_trial(out)
    np.testing.assert_array_equal(trial.tensor("CrossEntropyLoss_labels").value(0), y.numpy())
    np.testing.assert_array_equal(trial.tensor("CrossEntropyLoss_predictions").value(0),
                                  scores.argmax(dim=1).numpy())


@pytest.mark.parametrize(("loss_fn", "scores", "target", "labels", "preds"), [
    (nn.BCEWithLogitsLoss(), [[2.0], [-1.0], [0.5]], [[1.0], [1.0], [0.0]], [[1], [1], [0]], [[1], [0], [1]]),
    (nn.BCELoss(), [0.9, 0.2, 0.6], [1.0, 0.0, 0.0], [1, 0, 0], [1, 0, 1]),
    (nn.CrossEntropyLoss(), [[0.1, 2.0], [3.0, 0.0]], [[0.2, 0.8], [0.9, 0.1]], [1, 0], [1, 0]),  # soft targets
    (nn.NLLLoss(), [[-2.0, -0.1, -3.0]], [1], [1], [1]),
    (nn.MSELoss(), [0.5, 1.5], [1.0, 2.0], [1.0, 2.0], [0.5, 1.5]),  # regression: raw values
])
def test_labels_and_predictions_per_loss_kind(tmp_path: Path, loss_fn: nn.Module, scores: list, target: list,
                                              labels: list, preds: list) -> None:
    out = tmp_path / "t"
    model = nn.Identity()
    hook = Hook(_config(out, "labels", "predictions"))
    hook.register_module(model)
    hook.register_loss(loss_fn)
    model(torch.zeros(1))  # starts step 0
    loss_fn(torch.tensor(scores), torch.tensor(target))
    hook.close()
    trial = create_trial(out)
    name = loss_fn._get_name()
    np.testing.assert_array_equal(trial.tensor(f"{name}_labels").value(0), np.array(labels))
    np.testing.assert_array_equal(trial.tensor(f"{name}_predictions").value(0), np.array(preds))


class _ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.conv(x).mean(dim=(2, 3)))


def test_model_inputs_outputs_and_input_image(tmp_path: Path) -> None:
    out = tmp_path / "t"
    model = _ConvNet()
    hook = Hook(_config(out, "inputs", "outputs", "input_image"))
    hook.register_module(model)
    x = torch.randn(2, 3, 5, 5)
    y = model(x)
    hook.close()
    trial = create_trial(out)
    assert trial.tensor_names(collection="inputs") == ["_ConvNet_input_0"]
    assert trial.tensor_names(collection="input_image") == ["_ConvNet_input_0"]
    assert trial.tensor_names(collection="outputs") == ["_ConvNet_output_0"]
    assert trial.tensor_names() == ["_ConvNet_input_0", "_ConvNet_output_0"]  # not the submodules'
    np.testing.assert_array_equal(trial.tensor("_ConvNet_input_0").value(0), x.numpy())
    np.testing.assert_array_equal(trial.tensor("_ConvNet_output_0").value(0), y.detach().numpy())


def test_input_image_takes_only_4d_inputs_but_a_user_regex_anything(tmp_path: Path) -> None:
    out = tmp_path / "t"
    model = nn.Sequential(nn.Linear(4, 2))
    hook = Hook(_config(out, "inputs", "input_image", "input_sequence"))
    hook.register_module(model)
    model(torch.randn(3, 4))
    hook.close()
    trial = create_trial(out)
    assert trial.tensor_names(collection="inputs") == ["Sequential_input_0"]
    assert trial.tensor_names(collection="input_image") == []
    assert trial.tensor_names(collection="input_sequence") == []

    out2 = tmp_path / "t2"
    hook = Hook(_config(out2, "input_image", input_image={"include_regex": "^0_input_0$"}))
    hook.register_module(model)
    model(torch.randn(3, 4))
    hook.close()
    assert create_trial(out2).tensor_names(collection="input_image") == ["0_input_0"]


class _TextNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embedding0 = nn.Embedding(10, 4)  # the MXNet-style default regex matches this name
        self.tokens = nn.EmbeddingBag(10, 4)   # by type only
        self.head = nn.Linear(8, 2)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(torch.cat([self.embedding0(ids).mean(dim=1), self.tokens(ids)], dim=1))


def test_input_sequence_by_type_and_by_the_rules_default_regex(tmp_path: Path) -> None:
    out = tmp_path / "t"
    model = _TextNet()
    hook = Hook(_config(out, "input_sequence", input_sequence={"include_regex": ".*embedding0_input_0"}))
    hook.register_module(model)
    ids = torch.randint(0, 10, (3, 5))
    model(ids)
    hook.close()
    trial = create_trial(out)
    assert trial.tensor_names(collection="input_sequence") == ["embedding0_input_0", "tokens_input_0"]
    got = trial.tensor("tokens_input_0").value(0)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, ids.numpy())


def test_reductions_only_for_the_new_collections(tmp_path: Path) -> None:
    out = tmp_path / "t"
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    hook = Hook(_config(out, "relu_output", "labels", relu_output={"reductions": "mean,abs_max"},
                        labels={"reductions": "max"}))
    loss_fn = nn.CrossEntropyLoss()
    hook.register_module(model)
    hook.register_loss(loss_fn)
    x, y = torch.randn(5, 4), torch.tensor([0, 2, 1, 2, 0])
    loss_fn(model(x), y)
    hook.close()
    index = json.loads((out / "index/000000000/000000000000_worker_0.json").read_text())
    saved = {p["tensorname"] for p in index["tensor_payload"]}
    assert {"smdebug/reductions/mean/1_output_0", "smdebug/reductions/abs_max/1_output_0",
            "smdebug/reductions/max/CrossEntropyLoss_labels"} <= saved
    assert "1_output_0" not in saved and "CrossEntropyLoss_labels" not in saved
    trial = create_trial(out)
    assert trial.tensor_names(collection="relu_output") == ["1_output_0"]
    relu = model[1](model[0](x)).detach()
    assert trial.tensor("1_output_0").reduction_value(0, "mean") == pytest.approx(float(relu.mean()))
    assert trial.tensor("CrossEntropyLoss_labels").reduction_value(0, "max") == 2
