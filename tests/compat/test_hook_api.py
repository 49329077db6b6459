"""smdebug.pytorch.Hook in-process: smdebug's constructor and defaults, collections whose changes take
effect, subclasses' forward_hook / backward_hook, smdebug's names for nested modules, the hook
singleton (get_hook / set_hook / del_hook), one writer per folder, and the hand-over from the
zero-code hook. Read back with sdlocal's reader."""
from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import smdebug.pytorch as smd
import torch
from torch import nn

from sdlocal.hook import _current
from sdlocal.hook._autoattach import AutoAttach
from sdlocal.hook.config import HookConfig
from sdlocal.hook.errors import HookError
from sdlocal.trial import create_trial
from sdlocal.trial.modes import ModeKeys


@pytest.fixture(autouse=True)
def _no_current_hook(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    _current.set_current(None)
    # outside a job: no hook config file
    monkeypatch.setenv("SMDEBUG_CONFIG_FILE_PATH", "/nonexistent/debughookconfig.json")
    monkeypatch.delenv("TRAINING_JOB_NAME", raising=False)
    yield
    _current.set_current(None)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(2, 2, 3, padding=1)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.conv1(x)) + x


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 2, 3, padding=1)
        self.layer1 = nn.Sequential(Block())
        self.fc = nn.Linear(2 * 4 * 4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.layer1(self.conv1(x)), 1))


def train(hook: Any, model: nn.Module, steps: int, loss_fn: nn.Module | None = None, *, seed: int = 0) -> None:
    loss_fn = loss_fn or nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        x, y = torch.rand(2, 1, 4, 4, generator=gen), torch.randint(0, 3, (2,), generator=gen)
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()


def steps_by_name(path: Path, mode: ModeKeys = ModeKeys.GLOBAL) -> dict[str, list[int]]:
    tr = create_trial(path)
    return {n: tr.tensor(n).steps(mode=mode) for n in tr.tensor_names()}


def test_constructor_defaults_global_mode_and_nested_names(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model, loss_fn = Net(), nn.CrossEntropyLoss()
    hook = smd.Hook(out_dir=str(tmp_path / "t"), save_config=smd.SaveConfig(save_interval=2),
                    include_regex=[r"layer1\.0\.relu_output", "Net_input", "fc_output"])
    assert hook.include_collections == ["losses", "default"]
    hook.register_hook(model)
    hook.register_loss(loss_fn)
    assert model.layer1[0].conv1._module_name == "layer1.0.conv1" and model._module_name == "Net"
    assert hook.module_maps[model.layer1[0]] == "layer1.0" and hook.module_maps[loss_fn] == "CrossEntropyLoss"
    train(hook, model, 5, loss_fn)
    hook.close()
    got = steps_by_name(tmp_path / "t")
    assert got == {n: [0, 2, 4] for n in ("CrossEntropyLoss_output_0", "Net_input_0", "fc_output_0",
                                          "layer1.0.relu_output_0")}
    # no set_mode: everything is GLOBAL (sdlocal's own hook would infer TRAIN from model.training)
    tr = create_trial(tmp_path / "t")
    assert tr.steps(mode=ModeKeys.TRAIN) == [] and tr.steps(mode=ModeKeys.GLOBAL) == [0, 2, 4]
    assert tr.collection("default").tensor_names == {"Net_input_0", "fc_output_0", "layer1.0.relu_output_0"}


def test_save_all_include_collections_and_reductions(tmp_path: Path) -> None:
    model = Net()
    hook = smd.Hook(out_dir=str(tmp_path / "t"), save_config=smd.SaveConfig(save_steps=[1]),
                    include_collections=["weights", "biases"],
                    reduction_config=smd.ReductionConfig(reductions=["max"], abs_norms=["l2"]))
    hook.register_module(model)
    train(hook, model, 2)
    hook.close()
    tr = create_trial(tmp_path / "t")
    assert sorted(tr.tensor_names(collection="weights")) == ["Net_conv1.weight", "Net_fc.weight",
                                                             "Net_layer1.0.conv1.weight"]
    w = tr.tensor("Net_fc.weight")
    assert w.steps() == [0, 1]
    with pytest.raises(Exception):  # noqa: B017 - ReductionConfig(save_raw_tensor=False): no raw tensor
        w.value(1)
    assert w.reduction_value(1, "l2", abs=True) > 0 and w.reduction_value(1, "max") is not None

    every = smd.Hook(out_dir=str(tmp_path / "all"), save_config=smd.SaveConfig(save_interval=1), save_all=True)
    assert "all" in every.include_collections
    model = Net()
    every.register_module(model)
    train(every, model, 1)
    every.close()
    names = set(create_trial(tmp_path / "all").tensor_names())
    assert {"Net_input_0", "layer1.0.conv1_output_0", "gradient/Net_fc.bias", "Net_fc.bias"} <= names


def test_dry_run_writes_nothing_not_even_tensorboard(tmp_path: Path) -> None:
    hook = smd.Hook(out_dir=str(tmp_path / "t"), dry_run=True, export_tensorboard=True,
                    save_config=smd.SaveConfig(save_interval=1))
    assert hook.tensorboard_dir == str(tmp_path / "t" / "tensorboard")
    model = Net()
    hook.register_module(model)
    train(hook, model, 3)
    hook.save_scalar("x", 1.0)
    hook.close()
    assert not (tmp_path / "t").exists()


def test_out_dir_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(HookError, match="out_dir is a required argument"):
        smd.Hook()
    with pytest.raises(HookError, match="local folders only"):
        smd.Hook(out_dir="s3://bucket/prefix")
    done = tmp_path / "done"
    done.mkdir()
    (done / "training_job_end.ts").write_text("")
    with pytest.raises(HookError, match="finished trial"):
        smd.Hook(out_dir=str(done))
    # in a job (a hook config exists): None and SageMaker's path are the job's tensors folder
    cfg = tmp_path / "debughookconfig.json"
    cfg.write_text(json.dumps({"LocalPath": str(tmp_path / "job")}))
    monkeypatch.setenv("SMDEBUG_CONFIG_FILE_PATH", str(cfg))
    assert smd.Hook().out_dir == tmp_path / "job"
    assert smd.Hook(out_dir="/opt/ml/output/tensors").out_dir == tmp_path / "job"
    assert smd.Hook(out_dir=str(tmp_path / "mine")).out_dir == tmp_path / "mine"


def test_collection_changes_take_effect_at_the_next_step(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = Net()
    hook = smd.Hook(out_dir=str(tmp_path / "t"), save_config=smd.SaveConfig(save_interval=1),
                    include_collections=["custom", "weights"])
    custom = hook.get_collection("custom")
    custom.add_module_tensors(model.fc, inputs=True)  # before registration, as smdebug's simple.py
    hook.get_collection("weights").save_config = smd.SaveConfig(save_interval=100)
    hook.register_module(model)
    train(hook, model, 2)
    custom.include("layer1.0.conv1_output")  # after two steps
    hook.get_collection("weights").save_config.get_save_config(smd.modes.GLOBAL).save_steps.append(3)
    hook.get_collection("weights").save_config = smd.SaveConfig(save_steps=[3], save_interval=100)
    train(hook, model, 3)
    hook.close()
    got = steps_by_name(tmp_path / "t")
    assert got["fc_input_0"] == [0, 1, 2, 3, 4] and got["fc_output_0"] == [0, 1, 2, 3, 4]
    assert got["layer1.0.conv1_output_0"] == [2, 3, 4]
    assert got["Net_fc.weight"] == [0, 3]
    tr = create_trial(tmp_path / "t")
    assert "layer1.0.conv1_output_0" in tr.collection("custom").tensor_names


def test_subclass_forward_and_backward_hooks_are_called(tmp_path: Path) -> None:
    calls: list[str] = []

    class Custom(smd.Hook):
        def forward_hook(self, module: nn.Module, inputs: Any, outputs: Any) -> None:
            calls.append(module._module_name)
            assert self.module_maps[module] == module._module_name
            if self._get_collections_to_save_for_step():
                self._write_outputs(module._module_name + "_seen", outputs)
            super().forward_hook(module, inputs, outputs)

        def backward_hook(self, tname: str) -> Any:
            inner = super().backward_hook(tname)

            def back(grad: torch.Tensor) -> None:
                calls.append("grad:" + tname)
                inner(grad)

            return back

    model, loss_fn = Net(), nn.CrossEntropyLoss()
    hook = Custom(out_dir=str(tmp_path / "t"), save_config=smd.SaveConfig(save_steps=[1], save_interval=100),
                  include_collections=["custom", "gradients"])
    hook.get_collection("custom").include(["_seen_output", r"^fc_output"])
    hook.register_module(model)
    hook.register_loss(loss_fn)
    train(hook, model, 2, loss_fn)
    hook.close()
    per_step = ["conv1", "layer1.0.conv1", "layer1.0.relu", "layer1.0", "layer1", "fc", "Net", "CrossEntropyLoss"]
    module_calls = [c for c in calls if not c.startswith("grad:")]
    assert module_calls == per_step * 2
    assert {c for c in calls if c.startswith("grad:")} == {f"grad:Net_{n}" for n, _ in model.named_parameters()}
    got = steps_by_name(tmp_path / "t")
    assert got["fc_output_0"] == [0, 1] and got["layer1.0_seen_output_0"] == [0, 1]
    assert got["gradient/Net_fc.weight"] == [0, 1]
    assert got["CrossEntropyLoss_seen_output_0"] == [0, 1]


def test_set_mode_modes_and_bad_mode(tmp_path: Path) -> None:
    model = Net()
    hook = smd.Hook(out_dir=str(tmp_path / "t"), save_config=smd.SaveConfig(mode_save_configs={
        smd.modes.TRAIN: smd.SaveConfigMode(save_interval=2), smd.modes.EVAL: smd.SaveConfigMode(save_interval=1)}),
        include_regex=["fc_output"])
    hook.register_module(model)
    hook.set_mode(smd.modes.TRAIN)
    train(hook, model, 3)
    hook.set_mode(smd.modes.EVAL)
    with torch.no_grad():
        model(torch.rand(2, 1, 4, 4))
        model(torch.rand(2, 1, 4, 4))
    assert hook.mode_steps[ModeKeys.EVAL] == 1 and hook.step == 4
    with pytest.raises(ValueError, match="invalid mode"):
        hook.set_mode("TRAINING")
    hook.close()
    tr = create_trial(tmp_path / "t")
    assert tr.tensor("fc_output_0").steps(mode=ModeKeys.TRAIN) == [0, 2]
    assert tr.tensor("fc_output_0").steps(mode=ModeKeys.EVAL) == [0, 1]


def test_scalars_and_tensors(tmp_path: Path) -> None:
    model = Net()
    hook = smd.Hook(out_dir=str(tmp_path / "t"), save_config=smd.SaveConfig(save_interval=2))
    hook.save_scalar("params", 123, sm_metric=True)  # before the first step: saved with it
    hook.register_module(model)
    for step in range(3):
        model(torch.rand(2, 1, 4, 4))
        hook.save_tensor("mine", torch.full((2,), float(step)), "my_coll")
        hook.save_scalar("acc", torch.tensor(0.5 + step))
    with pytest.raises(HookError, match="single value"):
        hook.save_scalar("bad", [1.0, 2.0])
    hook.close()
    tr = create_trial(tmp_path / "t")
    assert tr.tensor("scalar/params").steps() == [0] and tr.tensor("scalar/params").value(0).shape == (1,)
    assert tr.tensor("scalar/acc").steps() == [0, 1, 2]  # whatever the save config, as smdebug
    assert float(tr.tensor("scalar/acc").value(2)) == 2.5
    assert tr.tensor("mine").steps() == [0, 2]  # when its collection (the hook's save config) saves
    assert tr.collection("my_coll").tensor_names == {"mine"}
    assert hook.get_collection("my_coll").tensor_names == {"mine"}


def test_get_set_del_hook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert smd.get_hook() is None
    assert smd.get_hook(create_if_not_exists=True) is None  # no config file: no hook, as smdebug
    cfg = tmp_path / "debughookconfig.json"
    cfg.write_text(json.dumps({"LocalPath": str(tmp_path / "job"), "HookParameters": {"save_interval": "1"},
                               "CollectionConfigurations": [{"CollectionName": "weights"}]}))
    created = smd.get_hook(json_config_path=str(cfg), create_if_not_exists=True)
    assert isinstance(created, smd.Hook) and smd.get_hook() is created
    assert created.out_dir == tmp_path / "job" and "weights" in created.include_collections
    assert created.get_collection("weights").save_config.get_save_config(smd.modes.TRAIN).save_interval == 1
    other = smd.Hook(out_dir=str(tmp_path / "other"))
    assert smd.get_hook() is other  # the last hook created, as smdebug's Hook() calls set_hook
    smd.set_hook(created)
    assert smd.get_hook() is created
    smd.del_hook()
    assert smd.get_hook() is None
    with pytest.raises(FileNotFoundError):
        smd.Hook.create_from_json_file(str(tmp_path / "missing.json"))


def test_one_writer_per_folder(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # smdebug: the first hook to write claims the folder; another one of the process writes nothing
    first = smd.Hook(out_dir=str(tmp_path / "t"), save_config=smd.SaveConfig(save_interval=1),
                     include_collections=["weights"])
    second = smd.Hook(out_dir=str(tmp_path / "t"), save_config=smd.SaveConfig(save_interval=1),
                      include_collections=["weights"])
    m1, m2 = Net(), Net()
    first.register_module(m1)
    second.register_module(m2)
    with caplog.at_level(logging.WARNING):
        train(first, m1, 2)
        train(second, m2, 4)
        train(first, m1, 1)
        second.close()
        first.close()
    assert any("already writes to" in r.message for r in caplog.records)
    assert create_trial(tmp_path / "t").steps() == [0, 1, 2]  # the first writer's steps only


@pytest.fixture
def auto(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[AutoAttach]:
    cfg = tmp_path / "debughookconfig.json"
    cfg.write_text(json.dumps({"LocalPath": str(tmp_path / "job"), "HookParameters": {"save_interval": "1"},
                               "CollectionConfigurations": [{"CollectionName": "weights"}]}))
    monkeypatch.setenv("SMDEBUG_CONFIG_FILE_PATH", str(cfg))
    attach = AutoAttach(HookConfig.from_json_file(cfg))
    attach.install()
    try:
        yield attach
    finally:
        attach.close()


def test_zero_code_hook_never_attaches_beside_a_script_hook(tmp_path: Path, auto: AutoAttach) -> None:
    hook = smd.Hook.create_from_json_file()
    model = nn.Sequential(OrderedDict(fc=nn.Linear(3, 2)))
    hook.register_module(model)
    train_linear(model, 3)
    assert auto.hook is None
    hook.close()
    assert create_trial(tmp_path / "job").steps() == [0, 1, 2]


def train_linear(model: nn.Module, steps: int, loss_fn: nn.Module | None = None) -> None:
    loss_fn = loss_fn or nn.CrossEntropyLoss()
    for _ in range(steps):
        loss_fn(model(torch.rand(4, 3)), torch.randint(0, 2, (4,))).backward()


@pytest.mark.parametrize("warmup", [1, 3])
def test_hand_over_from_the_zero_code_hook_to_the_same_folder(tmp_path: Path, auto: AutoAttach, warmup: int) -> None:
    model = nn.Sequential(OrderedDict(fc=nn.Linear(3, 2)))
    with torch.no_grad():
        for _ in range(warmup):
            model(torch.rand(1, 3))  # the zero-code hook attaches here
    assert auto.hook is not None and auto.hook.step == warmup - 1
    hook = smd.Hook.create_from_json_file()  # ... and hands over here
    assert auto.hook.handed_over and hook.step == warmup - 1
    hook.register_module(model)
    hook.register_loss(loss_fn := nn.CrossEntropyLoss())
    hook.set_mode(smd.modes.TRAIN)
    train_linear(model, 2, loss_fn)
    hook.close()
    tr = create_trial(tmp_path / "job")
    # one step count for the job: the warm-up forwards, then the script's steps; nothing overwritten
    assert tr.steps() == list(range(warmup + 2)) and tr.training_ended()
    assert tr.tensor("Sequential_fc.weight").steps() == list(range(warmup + 2))
    assert tr.tensor("CrossEntropyLoss_output_0").steps() == [warmup, warmup + 1]
    assert tr.steps(mode=ModeKeys.TRAIN) == list(range(warmup + 2))


def test_hand_over_to_a_hook_with_its_own_folder(tmp_path: Path, auto: AutoAttach) -> None:
    model = nn.Sequential(OrderedDict(fc=nn.Linear(3, 2)))
    model(torch.rand(1, 3))
    model(torch.rand(1, 3))
    hook = smd.Hook(out_dir=str(tmp_path / "mine"), save_config=smd.SaveConfig(save_interval=1),
                    include_collections=["weights"])
    hook.register_module(model)
    train_linear(model, 2)
    hook.close()
    job = create_trial(tmp_path / "job")
    assert job.steps() == [0, 1] and job.training_ended()  # the zero-code hook's trial, finished
    assert create_trial(tmp_path / "mine").steps() == [0, 1]  # the script's own, from step 0
