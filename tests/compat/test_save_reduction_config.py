"""smdebug's SaveConfig / SaveConfigMode / ReductionConfig, as sdlocal's smdebug package gives them
(no torch needed): the save schedules of smdebug's docs, per-mode configs, the flat dict forms of
configs and collections files, one clear ValueError for a bad value."""
from __future__ import annotations

import pytest
import smdebug
from smdebug import ReductionConfig, SaveConfig, SaveConfigMode, modes
from smdebug.core.save_config import changes


def saved(cfg: SaveConfig, mode: modes = modes.GLOBAL, upto: int = 700) -> list[int]:
    return [s for s in range(upto) if cfg.should_save_step(mode, s)]


def test_save_config_examples_of_smdebugs_docs() -> None:
    # docs/api.md, "SaveConfig" examples
    assert saved(SaveConfig()) == [0, 500]
    assert saved(SaveConfig(save_interval=1), upto=4) == [0, 1, 2, 3]
    assert saved(SaveConfig(save_interval=100, end_step=200)) == [0, 100]
    assert saved(SaveConfig(save_interval=100, end_step=201)) == [0, 100, 200]
    assert saved(SaveConfig(save_interval=100, start_step=150)) == [200, 300, 400, 500, 600]
    assert saved(SaveConfig(save_steps=[3, 7])) == [0, 3, 7, 500]
    # torch_resnet.py's SaveConfig(save_interval) positional: an int is the interval (smdebug fails there)
    assert saved(SaveConfig(250)) == [0, 250, 500]


def test_per_mode_configs_and_missing_modes() -> None:
    cfg = SaveConfig(mode_save_configs={modes.TRAIN: SaveConfigMode(save_interval=2),
                                        modes.EVAL: SaveConfigMode(save_steps=[1], save_interval=100)})
    assert saved(cfg, modes.TRAIN, 7) == [0, 2, 4, 6]
    assert saved(cfg, modes.EVAL, 7) == [0, 1]
    assert cfg.mode_save_configs[modes.PREDICT] is None  # unset: the hook's (or the default) applies
    assert saved(cfg, modes.PREDICT) == [0, 500]
    assert cfg.to_json_dict() == {
        "TRAIN": {"save_interval": 2, "save_steps": [], "start_step": 0, "end_step": None},
        "EVAL": {"save_interval": 100, "save_steps": [1], "start_step": 0, "end_step": None},
        "PREDICT": None, "GLOBAL": None,
    }
    cfg.merge_default_save_config(SaveConfig(save_interval=7))
    assert cfg.mode_save_configs[modes.PREDICT] == SaveConfigMode(save_interval=7)
    assert cfg.get_save_config(modes.TRAIN) == SaveConfigMode(save_interval=2)


def test_parse_and_dict_forms() -> None:
    every = SaveConfigMode(save_interval=3)
    assert SaveConfig.parse(None) == SaveConfig()
    assert SaveConfig.parse(every) == SaveConfig(save_interval=3)
    parsed = SaveConfig.parse({"TRAIN": {"save_interval": 4}, "EVAL": None})
    assert parsed.get_save_config(modes.TRAIN).save_interval == 4
    assert SaveConfig.from_json(parsed.to_json()) == parsed
    mode = SaveConfigMode.from_dict({"save_steps": [5]}, {"save_interval": 9})
    assert mode is not None and (mode.save_interval, mode.save_steps) == (9, [5])


@pytest.mark.parametrize("make, field", [
    (lambda: SaveConfigMode(save_interval="often"), "SaveConfigMode.save_interval"),
    (lambda: SaveConfigMode(save_interval=0), "SaveConfigMode.save_interval"),
    (lambda: SaveConfigMode(save_steps="1,2"), "SaveConfigMode.save_steps"),
    (lambda: SaveConfig(mode_save_configs={modes.TRAIN: 5}), "SaveConfig.mode_save_configs"),
    (lambda: SaveConfig(mode_save_configs={"TRAINING": SaveConfigMode()}), "SaveConfig.mode_save_configs"),
    (lambda: SaveConfig.parse(3.5), "save_config"),
    (lambda: ReductionConfig(reductions=["median"]), "ReductionConfig.reductions"),
    (lambda: ReductionConfig(norms=["l3"]), "ReductionConfig.norms"),
    (lambda: ReductionConfig(save_raw_tensor="yes"), "ReductionConfig.save_raw_tensor"),
])
def test_bad_values_are_one_clear_value_error(make, field) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        make()


def test_skip_num_steps_is_not_smdebug_1_0() -> None:
    with pytest.raises(TypeError):
        SaveConfig(skip_num_steps=2)  # type: ignore[call-arg]


def test_reduction_config_as_smdebug() -> None:
    rc = ReductionConfig(reductions=["std", "variance"], abs_reductions=["mean"], norms=["l1"])
    assert rc.save_raw_tensor is False  # smdebug's default: reductions instead of the tensor
    assert rc.to_json_dict() == {"save_raw_tensor": False, "reductions": "std,variance,l1_norm,abs_mean",
                                 "save_shape": False}
    back = ReductionConfig.from_dict({"reductions": "min,abs_max,l2_norm,abs_l1_norm", "save_raw_tensor": True})
    assert back is not None
    assert (back.reductions, back.abs_reductions, back.norms, back.abs_norms) == (["min"], ["max"], ["l2"], ["l1"])
    assert back.save_raw_tensor and ReductionConfig.from_json(back.to_json()) == back


def test_changes_are_counted() -> None:
    cfg = SaveConfig(save_interval=5)
    before = changes()
    cfg.get_save_config(modes.TRAIN).save_interval = 6
    assert changes() > before
    before = changes()
    rc = ReductionConfig(reductions=["mean"])
    before = changes()
    rc.reductions.append("max")
    assert changes() > before
    assert saved(cfg, modes.TRAIN, 13) == [0, 6, 12]


def test_package_level_names() -> None:
    assert smdebug.SaveConfig is SaveConfig and smdebug.ReductionConfig is ReductionConfig
    assert smdebug.modes.EVAL == modes.EVAL
