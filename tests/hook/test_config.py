"""debughookconfig.json parsing: strings, mode prefixes, save_steps, overrides, built-ins, errors."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from sdlocal.hook.config import (
    CONFIG_FILE_PATH_ENV,
    DEFAULT_CONFIG_FILE_PATH,
    HookConfig,
    ModeSaveConfig,
    Reduction,
)
from sdlocal.hook.errors import HookConfigError
from sdlocal.trial.modes import ModeKeys


def test_defaults_save_losses_every_500_steps() -> None:
    cfg = HookConfig.from_dict({})
    assert cfg.local_path == "/opt/ml/output/tensors"
    assert [c.name for c in cfg.collections_to_save()] == ["losses"]
    losses = cfg.collection("losses")
    assert losses.include_regex == ("[Ll]oss_(?!input).*output",)
    assert losses.save_config.for_mode(ModeKeys.TRAIN) == ModeSaveConfig(500, (), 0, None)
    assert {c.name for c in cfg.collections} == {"all", "default", "weights", "biases", "gradients", "losses"}


def test_string_values_and_mode_prefixes() -> None:
    cfg = HookConfig.from_dict({
        "LocalPath": "/tmp/x",
        "HookParameters": {"save_interval": "10", "eval.save_interval": "3", "start_step": "2",
                           "end_step": "100", "train.save_steps": "1, 7,7"},
    })
    train = cfg.save_config.for_mode(ModeKeys.TRAIN)
    assert train == ModeSaveConfig(save_interval=10, save_steps=(1, 7), start_step=2, end_step=100)
    assert cfg.save_config.for_mode(ModeKeys.EVAL).save_interval == 3
    assert cfg.save_config.for_mode(ModeKeys.PREDICT).save_interval == 10
    assert cfg.save_config.for_mode(ModeKeys.GLOBAL).save_steps == ()
    assert cfg.local_path == "/tmp/x"


def test_save_schedule_steps_or_interval_in_range() -> None:
    sc = ModeSaveConfig(save_interval=5, save_steps=(1, 3, 200), start_step=5, end_step=20)
    saved = [s for s in range(250) if sc.should_save(s)]
    assert saved == [1, 3, 5, 10, 15, 200]
    assert [s for s in range(7) if ModeSaveConfig(save_interval=1).should_save(s)] == list(range(7))


def test_collection_parameters_override_hook_parameters() -> None:
    cfg = HookConfig.from_dict({
        "HookParameters": {"save_interval": "100", "train.save_interval": "50", "reductions": "max"},
        "CollectionConfigurations": [
            {"CollectionName": "weights", "CollectionParameters": {"save_interval": "7"}},
            {"CollectionName": "gradients"},
            {"CollectionName": "relu_output",
             "CollectionParameters": {"include_regex": ".*relu_output", "eval.save_interval": "2",
                                      "reductions": "mean,abs_max,l2_norm", "save_raw_tensor": "True"}},
        ],
    })
    w = cfg.collection("weights")
    # The collection's unprefixed value beats the hook's `train.` one.
    assert w.save_config.for_mode(ModeKeys.TRAIN).save_interval == 7
    assert w.save_config.for_mode(ModeKeys.EVAL).save_interval == 7
    g = cfg.collection("gradients")
    assert g.save_config.for_mode(ModeKeys.TRAIN).save_interval == 50
    assert g.save_config.for_mode(ModeKeys.EVAL).save_interval == 100
    assert g.reduction_config.reductions == (Reduction("max"),)
    assert g.reduction_config.save_raw_tensor is False  # reductions without save_raw_tensor: smdebug
    r = cfg.collection("relu_output")
    assert r.include_regex == (".*relu_output",)
    assert r.save_config.for_mode(ModeKeys.EVAL).save_interval == 2
    assert r.save_config.for_mode(ModeKeys.TRAIN).save_interval == 50
    assert r.reduction_config.reductions == (Reduction("mean"), Reduction("max", abs=True), Reduction("l2"))
    assert r.reduction_config.save_raw_tensor is True
    assert r.reduction_config.to_dict()["reductions"] == "mean,abs_max,l2_norm"
    # Losses keep the raw loss and get no reductions.
    losses = cfg.collection("losses")
    assert losses.reduction_config.reductions == () and losses.reduction_config.save_raw_tensor
    assert {c.name for c in cfg.collections_to_save()} == {"weights", "gradients", "relu_output", "losses"}


def test_reduction_tensor_names_as_smdebug() -> None:
    assert Reduction("mean").tensor_name("Net_fc.weight") == "smdebug/reductions/mean/Net_fc.weight"
    assert Reduction("max", abs=True).tensor_name("x") == "smdebug/reductions/abs_max/x"
    assert Reduction("l2").tensor_name("x") == "smdebug/reductions/l2/x"


def test_include_regex_list_or_comma_string_and_save_all() -> None:
    cfg = HookConfig.from_dict({
        "HookParameters": {"include_regex": "fc0,head", "save_all": "true"},
        "CollectionConfigurations": [
            {"CollectionName": "custom", "CollectionParameters": {"include_regex": ["a.*", "b"]}}],
    })
    assert cfg.collection("default").include_regex == ("fc0", "head")
    assert cfg.collection("all").include_regex == (".*",)
    assert cfg.collection("custom").include_regex == ("a.*", "b")
    # Saving `all` saves every collection (smdebug).
    assert {c.name for c in cfg.collections_to_save()} == {c.name for c in cfg.collections}


@pytest.mark.parametrize("name", ["inputs", "outputs", "labels", "predictions", "input_image", "input_sequence",
                                  "relu_input", "relu_output", "tanh_input", "tanh_output", "sigmoid_input",
                                  "sigmoid_output"])
def test_role_collections_are_known_without_a_regex(name: str) -> None:
    # Members by module type / role (hook._members); only the activation ones have a name regex.
    cfg = HookConfig.from_dict({"CollectionConfigurations": [{"CollectionName": name}]})
    assert name in {c.name for c in cfg.collections_to_save()}
    assert bool(cfg.collection(name).include_regex) == name.endswith(("_input", "_output"))
    assert not cfg.collection(name).matches("Sequential_fc0.weight")


def test_activation_regex_defaults_merge_with_the_users() -> None:
    cfg = HookConfig.from_dict({"CollectionConfigurations": [
        {"CollectionName": "relu_output", "CollectionParameters": {"include_regex": ".*relu_output"}},
        {"CollectionName": "tanh_input", "CollectionParameters": {"include_regex": "act_in"}},
        {"CollectionName": "input_image", "CollectionParameters": {"include_regex": ".*hybridsequential0_input_0"}}]})
    assert cfg.collection("relu_output").include_regex == (".*relu_output",)
    assert cfg.collection("relu_output").matches("layer0_relu_output_0")
    assert not cfg.collection("relu_output").matches("layer0_relu_input_0")
    assert cfg.collection("tanh_input").include_regex == (".*tanh_input", "act_in")
    assert cfg.collection("input_image").include_regex == (".*hybridsequential0_input_0",)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"HookParameters": {"save_interval": "ten"}}, "HookParameters.save_interval"),
        ({"HookParameters": {"save_interval": 0}}, "HookParameters.save_interval"),
        ({"HookParameters": {"train.save_interval": "-1"}}, "HookParameters.train.save_interval"),
        ({"HookParameters": {"save_steps": "1,x"}}, "HookParameters.save_steps"),
        ({"HookParameters": {"reductions": "mean,median"}}, "HookParameters.reductions"),
        ({"HookParameters": {"save_raw_tensor": "yes"}}, "HookParameters.save_raw_tensor"),
        ({"HookParameters": {"include_regex": "("}}, "HookParameters.include_regex"),
        ({"HookParameters": "x"}, "HookParameters"),
        ({"CollectionConfigurations": {"CollectionName": "w"}}, "CollectionConfigurations"),
        ({"CollectionConfigurations": [{"CollectionParameters": {}}]}, "CollectionConfigurations[0].CollectionName"),
        ({"CollectionConfigurations": [{"CollectionName": "weights"}, {"CollectionName": "mine"}]},
         "CollectionConfigurations[1].CollectionParameters.include_regex"),
        ({"CollectionConfigurations": [{"CollectionName": "weights",
                                        "CollectionParameters": {"eval.end_step": "1.5"}}]},
         "CollectionConfigurations[0].CollectionParameters.eval.end_step"),
        ({"LocalPath": 3}, "LocalPath"),
    ],
)
def test_bad_values_name_the_field(data: dict, field: str) -> None:
    with pytest.raises(HookConfigError) as exc:
        HookConfig.from_dict(data)
    assert exc.value.field == field
    assert str(exc.value).startswith(field + ":")


def test_end_step_none_string() -> None:
    cfg = HookConfig.from_dict({"HookParameters": {"end_step": "None", "start_step": 3}})
    assert cfg.save_config.for_mode(ModeKeys.TRAIN).end_step is None
    assert cfg.save_config.for_mode(ModeKeys.TRAIN).start_step == 3


def test_from_json_file_reads_env_at_call_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "debughookconfig.json"
    path.write_text(json.dumps({"LocalPath": str(tmp_path / "out"), "HookParameters": {"save_interval": "2"}}))
    monkeypatch.delenv(CONFIG_FILE_PATH_ENV, raising=False)
    assert HookConfig.default_path() == DEFAULT_CONFIG_FILE_PATH
    monkeypatch.setenv(CONFIG_FILE_PATH_ENV, str(path))
    cfg = HookConfig.from_json_file()
    assert cfg.local_path == str(tmp_path / "out")
    assert cfg.save_config.for_mode(ModeKeys.TRAIN).save_interval == 2


def test_unreadable_or_invalid_json_file(tmp_path: Path) -> None:
    with pytest.raises(HookConfigError, match="cannot read"):
        HookConfig.from_json_file(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(HookConfigError, match="not valid JSON"):
        HookConfig.from_json_file(bad)
