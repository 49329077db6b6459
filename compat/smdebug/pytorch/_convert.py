"""smdebug's mutable config objects <-> sdlocal's frozen hook config (hook.config).

The smdebug API's Hook keeps smdebug's objects (what users read and change); the engine
(hook.pytorch.Hook) runs on a HookConfig built from them, rebuilt when they change.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from sdlocal.hook import config as hc
from sdlocal.trial.modes import ModeKeys
from smdebug.core.reduction_config import ReductionConfig
from smdebug.core.save_config import SaveConfig, SaveConfigMode
from smdebug.pytorch.collection import Collection, CollectionManager

# smdebug: scalar collections get no reductions and no histograms.
NON_REDUCTION = frozenset({"losses", "metrics", "feature_importance", "average_shap", "sm_metrics"})


def mode_config(cfg: SaveConfigMode | None) -> hc.ModeSaveConfig:
    if cfg is None:
        return hc.ModeSaveConfig()
    return hc.ModeSaveConfig(cfg.save_interval, tuple(sorted(set(cfg.save_steps))), cfg.start_step, cfg.end_step)


def save_config(own: SaveConfig | None, default: SaveConfig) -> hc.SaveConfig:
    """A collection's save config; a mode it leaves unset takes the hook's (smdebug's merge)."""
    by_mode = {}
    for mode in ModeKeys:
        cfg = own.mode_save_configs.get(mode) if own is not None else None
        by_mode[mode] = mode_config(cfg if cfg is not None else default.mode_save_configs.get(mode))
    return hc.SaveConfig(by_mode)


def reduction_config(rc: ReductionConfig) -> hc.ReductionConfig:
    reds = [hc.Reduction(r) for r in rc.reductions] + [hc.Reduction(n) for n in rc.norms]
    reds += [hc.Reduction(r, True) for r in rc.abs_reductions] + [hc.Reduction(n, True) for n in rc.abs_norms]
    return hc.ReductionConfig(tuple(dict.fromkeys(reds)), rc.save_raw_tensor, rc.save_shape)


def to_hook_config(*, local_path: str, manager: CollectionManager, saved: Iterable[str], default_save: SaveConfig,
                   default_reduction: ReductionConfig, include_regex: tuple[str, ...], save_all: bool,
                   include_workers: str, module_name: Callable[[Any], str | None]) -> hc.HookConfig:
    colls = []
    for name, c in manager.collections.items():
        regex = list(c.include_regex)
        for module, (inputs, outputs) in c.modules.items():
            mname = module_name(module)  # known once the module is registered
            if mname is not None:
                regex += [f"{mname}_input_"] if inputs else []
                regex += [f"{mname}_output_"] if outputs else []
        if not regex and not c.tensor_names:
            regex = list(hc.OPTIONAL_REGEX.get(name, ()))  # sdlocal's meaning of relu_output, ...
        rc = (hc.ReductionConfig() if name in NON_REDUCTION
              else reduction_config(c.reduction_config or default_reduction))
        colls.append(hc.CollectionConfig(
            name=name, include_regex=tuple(dict.fromkeys(regex)), save_config=save_config(c.save_config, default_save),
            reduction_config=rc, save_histogram=bool(c.save_histogram) and name not in NON_REDUCTION,
            tensor_names=tuple(sorted(c.tensor_names))))
    names = {c.name for c in colls}
    wanted = set(saved) | {"losses"}
    if "all" in wanted:  # smdebug: saving `all` saves every collection
        wanted |= names
    return hc.HookConfig(
        local_path=local_path, save_config=save_config(None, default_save),
        reduction_config=reduction_config(default_reduction), include_regex=include_regex, save_all=save_all,
        include_workers=include_workers, collections=tuple(colls), saved_collection_names=frozenset(wanted & names))


# ---------------------------------------------------------------------------- from a json config

def to_save_config(sc: hc.SaveConfig) -> SaveConfig:
    return SaveConfig(mode_save_configs={
        mode: SaveConfigMode(m.save_interval, m.start_step, m.end_step, list(m.save_steps))
        for mode, m in sc.by_mode.items()})


def to_reduction_config(rc: hc.ReductionConfig) -> ReductionConfig:
    def ops(norm: bool, absolute: bool) -> list[str]:
        return [r.op for r in rc.reductions if (r.op in hc.NORM_OPS) == norm and r.abs == absolute]

    return ReductionConfig(ops(False, False), ops(False, True), ops(True, False), ops(True, True),
                           rc.save_raw_tensor, rc.save_shape)


def to_collections(config: hc.HookConfig) -> Mapping[str, Collection]:
    return {c.name: Collection(c.name, list(c.include_regex), set(c.tensor_names),
                               to_reduction_config(c.reduction_config), to_save_config(c.save_config),
                               c.save_histogram)
            for c in config.collections}
