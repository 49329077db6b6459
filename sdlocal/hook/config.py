"""debughookconfig.json, parsed once into frozen dataclasses (smdebug's json_config semantics).

Shape (values may be strings, SageMaker passes everything as strings):
    {"LocalPath": "/opt/ml/output/tensors",
     "HookParameters": {"save_interval": "10", "train.save_interval": "5", "reductions": "mean,abs_max"},
     "CollectionConfigurations": [{"CollectionName": "weights", "CollectionParameters": {...}}]}
Collection parameters override hook parameters, mode-prefixed keys (`train.`, `eval.`,
`predict.`, `global.`) override unprefixed ones.
"""
from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sdlocal.hook._parse import is_none, parse_bool, parse_int, parse_regexes, parse_steps, parse_str_list
from sdlocal.hook.errors import HookConfigError
from sdlocal.trial.collection import SaveConfigMode
from sdlocal.trial.modes import ModeKeys

logger = logging.getLogger(__name__)

CONFIG_FILE_PATH_ENV = "SMDEBUG_CONFIG_FILE_PATH"
DEFAULT_CONFIG_FILE_PATH = "/opt/ml/input/config/debughookconfig.json"
DEFAULT_LOCAL_PATH = "/opt/ml/output/tensors"

MODE_PREFIXES: dict[ModeKeys, str] = {
    ModeKeys.TRAIN: "train.",
    ModeKeys.EVAL: "eval.",
    ModeKeys.PREDICT: "predict.",
    ModeKeys.GLOBAL: "global.",
}
_SAVE_KEYS = ("save_interval", "save_steps", "start_step", "end_step")
_REDUCTION_KEYS = ("reductions", "save_raw_tensor", "save_shape")
_OTHER_KEYS = frozenset(
    {"include_regex", "save_all", "include_workers", "export_tensorboard", "tensorboard_dir", "save_histogram"}
)
REDUCTION_OPS = ("min", "max", "mean", "std", "variance", "sum", "prod")
NORM_OPS = ("l1", "l2")
REDUCTIONS_PREFIX = "smdebug/reductions/"

# Built-in PyTorch collections (trial-format.md §8), in the order they are written.
BUILTIN_REGEX: dict[str, tuple[str, ...]] = {
    "all": (),
    "default": (),
    "weights": ("^(?!gradient).*weight",),
    "biases": ("^(?!gradient).*bias",),
    "gradients": ("^gradient",),
    "losses": ("[Ll]oss_(?!input).*output",),
}
# Known collections, saved only when configured: their default name regexes. Most also get
# members by module type or role, found by the hook (hook._members), so they need no regex:
# relu_*/tanh_*/sigmoid_*: inputs/outputs of nn.ReLU/ReLU6, nn.Tanh, nn.Sigmoid modules; inputs /
# outputs: the registered model's; input_image: the model's first input when it is 4-D (N, C, H, W);
# input_sequence: nn.Embedding/EmbeddingBag inputs; labels / predictions: each loss module's target
# and predicted class ids (`<LossClass>_labels`, `<LossClass>_predictions`).
OPTIONAL_REGEX: dict[str, tuple[str, ...]] = {
    "inputs": (),
    "outputs": (),
    "relu_input": (".*relu_input",),
    "relu_output": (".*relu_output",),
    "tanh_input": (".*tanh_input",),
    "tanh_output": (".*tanh_output",),
    "sigmoid_input": (".*sigmoid_input",),
    "sigmoid_output": (".*sigmoid_output",),
    "input_image": (),
    "input_sequence": (),
    "labels": (),
    "predictions": (),
    # sdlocal's training records (hook/records.py, sdlocal.trial.records): no tensors, a sidecar
    "sdlocal_records": (),
}
ALWAYS_SAVED = frozenset({"losses"})

# The XGBoost hook's collections (smdebug's XGBoost collection manager), all of them known: a
# configured one needs no include_regex. Metric names are `<data set>-<metric>` as xgboost's
# evals_log gives them (`train-rmse`, `validation-logloss`); losses are every metric but those
# that grow as the model improves (auc, map). `bias` (the SHAP base value) is no feature.
XGBOOST_REGEX: dict[str, tuple[str, ...]] = {
    "all": (),
    "default": (),
    "hyperparameters": ("^hyperparameters/.*$",),
    "metrics": ("^[a-zA-Z_]+-[a-zA-Z0-9@_.:]+$",),
    "losses": ("^[a-zA-Z_]+-.+(?<!auc)(?<!map)(?<!aucpr)$",),
    "predictions": ("^predictions$",),
    "labels": ("^labels$",),
    "feature_importance": ("^feature_importance/.*",),
    "average_shap": ("^average_shap/.*(?<!/bias)$",),
    "full_shap": ("^full_shap/.*(?<!/bias)$",),
    "trees": ("^trees/.*",),
}
# smdebug's XGBoost hook saves `metrics` when no collection is configured, every 10 iterations
# unless the config says otherwise.
XGBOOST_ALWAYS_SAVED = frozenset({"metrics"})
XGBOOST_SAVE_INTERVAL = 10
FRAMEWORKS = ("pytorch", "xgboost")
# Never saved in EVAL/PREDICT (there is no backward pass there).
TRAIN_ONLY_COLLECTIONS = frozenset({"gradients", "optimizer_variables"})
# Scalar collections get no reductions and always keep the raw value (smdebug skips their
# reductions; we also keep the raw loss so loss rules have data whatever the reductions).
SCALAR_COLLECTIONS = frozenset({"losses", "metrics", "sm_metrics"})


# The per-mode save schedule is the trial format's own (it is written to the collections file).
ModeSaveConfig = SaveConfigMode


def _default_modes() -> Mapping[ModeKeys, ModeSaveConfig]:
    return {mode: ModeSaveConfig() for mode in ModeKeys}


@dataclass(frozen=True)
class SaveConfig:
    """A ModeSaveConfig per mode."""

    by_mode: Mapping[ModeKeys, ModeSaveConfig] = field(default_factory=_default_modes)

    def for_mode(self, mode: ModeKeys) -> ModeSaveConfig:
        return self.by_mode[mode]

    def should_save(self, mode: ModeKeys, mode_step: int) -> bool:
        return self.by_mode[mode].should_save(mode_step)

    def to_dict(self) -> dict[str, Any]:
        return {mode.name: self.by_mode[mode].to_dict() for mode in ModeKeys}


@dataclass(frozen=True)
class Reduction:
    """One reduction: `op` in REDUCTION_OPS or NORM_OPS, optionally of the absolute value."""

    op: str
    abs: bool = False

    @property
    def config_token(self) -> str:
        """As written in the config / collections file: `mean`, `abs_max`, `l2_norm`, `abs_l1_norm`."""
        token = f"{self.op}_norm" if self.op in NORM_OPS else self.op
        return f"abs_{token}" if self.abs else token

    def tensor_name(self, base: str) -> str:
        """`smdebug/reductions/<op>/<base>` or `smdebug/reductions/abs_<op>/<base>` (as smdebug)."""
        return f"{REDUCTIONS_PREFIX}{'abs_' if self.abs else ''}{self.op}/{base}"


@dataclass(frozen=True)
class ReductionConfig:
    reductions: tuple[Reduction, ...] = ()
    save_raw_tensor: bool = True
    save_shape: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "save_raw_tensor": self.save_raw_tensor,
            "reductions": ",".join(r.config_token for r in self.reductions),
            "save_shape": self.save_shape,
        }


@dataclass(frozen=True)
class CollectionConfig:
    name: str
    include_regex: tuple[str, ...] = ()
    save_config: SaveConfig = field(default_factory=SaveConfig)
    reduction_config: ReductionConfig = field(default_factory=ReductionConfig)
    save_histogram: bool = True
    tensor_names: tuple[str, ...] = ()  # members by name, beside the regexes (smdebug's tensor_names)

    def matches(self, tensor_name: str) -> bool:
        return tensor_name in self.tensor_names or any(re.search(rx, tensor_name) for rx in self.include_regex)

    def should_save(self, mode: ModeKeys, mode_step: int) -> bool:
        if mode in (ModeKeys.EVAL, ModeKeys.PREDICT) and self.name in TRAIN_ONLY_COLLECTIONS:
            return False
        return self.save_config.should_save(mode, mode_step)

    def to_dict(self, tensor_names: list[str] | tuple[str, ...] = ()) -> dict[str, Any]:
        """The collections-file JSON of this collection (trial-format.md §5)."""
        return {
            "name": self.name,
            "include_regex": list(self.include_regex),
            "tensor_names": sorted({*tensor_names, *self.tensor_names}),
            "reduction_config": self.reduction_config.to_dict(),
            "save_config": self.save_config.to_dict(),
            "save_histogram": self.save_histogram,
        }


@dataclass(frozen=True)
class HookConfig:
    local_path: str = DEFAULT_LOCAL_PATH
    save_config: SaveConfig = field(default_factory=SaveConfig)
    reduction_config: ReductionConfig = field(default_factory=ReductionConfig)
    include_regex: tuple[str, ...] = ()
    save_all: bool = False
    include_workers: str = "one"
    # Every known collection (built-ins first, then configured ones), effective settings.
    collections: tuple[CollectionConfig, ...] = ()
    saved_collection_names: frozenset[str] = ALWAYS_SAVED
    # HookParameters export_tensorboard / tensorboard_dir (smdebug's): where TensorBoard event
    # files go, None for none. A job's TensorBoardOutputConfig wins (hook._tensorboard.job_dir).
    tensorboard_dir: str | None = None

    def collection(self, name: str) -> CollectionConfig:
        for c in self.collections:
            if c.name == name:
                return c
        raise KeyError(name)

    def collections_to_save(self) -> tuple[CollectionConfig, ...]:
        return tuple(c for c in self.collections if c.name in self.saved_collection_names)

    @staticmethod
    def default_path() -> str:
        """`$SMDEBUG_CONFIG_FILE_PATH`, else SageMaker's path; read at call time."""
        return os.environ.get(CONFIG_FILE_PATH_ENV) or DEFAULT_CONFIG_FILE_PATH

    @classmethod
    def from_json_file(cls, path: str | Path | None = None, *, framework: str = "pytorch") -> HookConfig:
        path = Path(path if path is not None else cls.default_path())
        try:
            data = json.loads(path.read_text())
        except OSError as e:
            raise HookConfigError(str(path), f"cannot read the hook config: {e}") from e
        except json.JSONDecodeError as e:
            raise HookConfigError(str(path), f"not valid JSON: {e}") from e
        return cls.from_dict(data, framework=framework)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, framework: str = "pytorch") -> HookConfig:
        """`framework` picks the built-in collections: PyTorch's, or the XGBoost hook's
        (XGBOOST_REGEX; metrics saved by default, every 10 iterations by default)."""
        if framework not in FRAMEWORKS:
            raise ValueError(f"framework must be one of {FRAMEWORKS}, got {framework!r}")
        xgb = framework == "xgboost"
        builtin_regex = XGBOOST_REGEX if xgb else BUILTIN_REGEX
        optional_regex: Mapping[str, tuple[str, ...]] = {} if xgb else OPTIONAL_REGEX
        if not isinstance(data, Mapping):
            raise HookConfigError("<root>", f"expected a JSON object, got {type(data).__name__}")
        local_path = data.get("LocalPath") or DEFAULT_LOCAL_PATH
        if not isinstance(local_path, str):
            raise HookConfigError("LocalPath", f"expected a string, got {local_path!r}")
        hook_params = _params_dict(data.get("HookParameters"), "HookParameters")
        _warn_unknown(hook_params, "HookParameters")
        if xgb and not any(k.split(".")[-1] == "save_interval" for k in hook_params):
            hook_params["save_interval"] = str(XGBOOST_SAVE_INTERVAL)
        hook_modes = _mode_overrides(hook_params, "HookParameters")
        hook_save = _build_save_config(hook_modes, "HookParameters")
        hook_red = _reduction_overrides(hook_params)
        hook_reduction = _build_reduction_config(hook_red, "HookParameters")
        include_regex = parse_regexes(hook_params.get("include_regex"), "HookParameters.include_regex")
        save_all = parse_bool(hook_params.get("save_all"), False, "HookParameters.save_all")
        include_workers = str(hook_params.get("include_workers", "one")).strip().lower()
        if include_workers not in ("one", "all"):
            raise HookConfigError("HookParameters.include_workers", f"expected 'one' or 'all', got {include_workers!r}")
        hook_histogram = parse_bool(hook_params.get("save_histogram"), True, "HookParameters.save_histogram")
        export_tb = parse_bool(hook_params.get("export_tensorboard"), False, "HookParameters.export_tensorboard")
        tb_dir = hook_params.get("tensorboard_dir")
        if tb_dir is not None and not isinstance(tb_dir, str):
            raise HookConfigError("HookParameters.tensorboard_dir", f"expected a string, got {tb_dir!r}")
        tensorboard_dir = (tb_dir or os.path.join(local_path, "tensorboard")) if export_tb or tb_dir else None

        configured = _collection_entries(data.get("CollectionConfigurations"))
        saved = set(XGBOOST_ALWAYS_SAVED if xgb and not configured else () if xgb else ALWAYS_SAVED)
        saved |= {name for name, _, _ in configured}
        if include_regex:
            saved.add("default")
        if save_all:
            saved.add("all")

        def builtin(name: str, regex: tuple[str, ...]) -> CollectionConfig:
            if name == "default":
                regex = include_regex
            if name == "all" and "all" in saved:
                regex = (".*",)
            return CollectionConfig(name, regex, hook_save, _scalar_safe(name, hook_reduction),
                                    hook_histogram and name not in SCALAR_COLLECTIONS)

        collections: dict[str, CollectionConfig] = {n: builtin(n, rx) for n, rx in builtin_regex.items()}
        for name, params, where in configured:
            _warn_unknown(params, where)
            base = collections.get(name) or builtin(name, optional_regex.get(name, ()))
            regex = base.include_regex
            if "include_regex" in params:
                regex = tuple(dict.fromkeys(regex + parse_regexes(params["include_regex"], f"{where}.include_regex")))
            if not regex and name not in optional_regex and not (xgb and name in builtin_regex):
                raise HookConfigError(f"{where}.include_regex",
                                      f"collection {name!r} is not built in and needs an include_regex")
            modes = _mode_overrides(params, where)
            merged_modes = {m: {**hook_modes[m], **modes[m]} for m in ModeKeys}
            red = {**hook_red, **_reduction_overrides(params)}
            collections[name] = CollectionConfig(
                name=name,
                include_regex=regex,
                save_config=_build_save_config(merged_modes, where),
                reduction_config=_scalar_safe(name, _build_reduction_config(red, where)),
                save_histogram=parse_bool(params.get("save_histogram"), base.save_histogram,
                                           f"{where}.save_histogram"),
            )
        if "all" in saved:  # smdebug: saving `all` saves every collection
            saved |= set(collections)
        return cls(
            local_path=local_path,
            save_config=hook_save,
            reduction_config=hook_reduction,
            include_regex=include_regex,
            save_all=save_all,
            include_workers=include_workers,
            collections=tuple(collections.values()),
            saved_collection_names=frozenset(saved),
            tensorboard_dir=tensorboard_dir,
        )


# ---------------------------------------------------------------------------- parsing helpers


def _params_dict(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise HookConfigError(where, f"expected a JSON object, got {value!r}")
    for key in value:
        if not isinstance(key, str):
            raise HookConfigError(where, f"keys must be strings, got {key!r}")
    return dict(value)


def _collection_entries(value: Any) -> list[tuple[str, dict[str, Any], str]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise HookConfigError("CollectionConfigurations", f"expected a list, got {value!r}")
    entries: list[tuple[str, dict[str, Any], str]] = []
    for i, item in enumerate(value):
        where = f"CollectionConfigurations[{i}]"
        if not isinstance(item, Mapping):
            raise HookConfigError(where, f"expected a JSON object, got {item!r}")
        name = item.get("CollectionName")
        if not isinstance(name, str) or not name.strip():
            raise HookConfigError(f"{where}.CollectionName", f"expected a non-empty string, got {name!r}")
        params = _params_dict(item.get("CollectionParameters"), f"{where}.CollectionParameters")
        entries.append((name.strip(), params, f"{where}.CollectionParameters"))
    return entries


def known_parameters() -> tuple[str, ...]:
    """Every HookParameters / CollectionParameters key the hook reads (save keys also with a mode prefix)."""
    prefixed = tuple(p + k for p in MODE_PREFIXES.values() for k in _SAVE_KEYS)
    return (*_SAVE_KEYS, *prefixed, *_REDUCTION_KEYS, *sorted(_OTHER_KEYS))


def is_known_parameter(key: str) -> bool:
    bare = key.split(".", 1)[1] if key.split(".", 1)[0] + "." in MODE_PREFIXES.values() else key
    return bare in _SAVE_KEYS or bare in _REDUCTION_KEYS or bare in _OTHER_KEYS


def _warn_unknown(params: Mapping[str, Any], where: str) -> None:
    # smdebug ignores unknown keys; so do we (a SageMaker request is valid with them), but say so.
    # (sdlocal's launcher refuses them when it reads the spec: launcher/spec/hook_params.py)
    for key in params:
        if not is_known_parameter(key):
            logger.warning("%s.%s is not a known hook parameter; ignored", where, key)


def _mode_overrides(params: Mapping[str, Any], where: str) -> dict[ModeKeys, dict[str, Any]]:
    """Per mode, the save keys given: unprefixed ones, overridden by `<mode>.` prefixed ones."""
    base = {k: params[k] for k in _SAVE_KEYS if k in params}
    out: dict[ModeKeys, dict[str, Any]] = {}
    for mode, prefix in MODE_PREFIXES.items():
        specific = {k: params[prefix + k] for k in _SAVE_KEYS if prefix + k in params}
        merged = {**base, **specific}
        # Remember which field each value came from, for error messages.
        out[mode] = {k: (v, f"{where}.{prefix + k if k in specific else k}") for k, v in merged.items()}
    return out


def _build_save_config(modes: Mapping[ModeKeys, Mapping[str, tuple[Any, str]]], where: str) -> SaveConfig:
    by_mode: dict[ModeKeys, ModeSaveConfig] = {}
    for mode in ModeKeys:
        values = modes[mode]
        kwargs: dict[str, Any] = {}
        if "save_interval" in values:
            v, f = values["save_interval"]
            kwargs["save_interval"] = parse_int(v, f, minimum=1)
        if "save_steps" in values:
            v, f = values["save_steps"]
            kwargs["save_steps"] = parse_steps(v, f)
        if "start_step" in values:
            v, f = values["start_step"]
            kwargs["start_step"] = parse_int(v, f, minimum=0)
        if "end_step" in values:
            v, f = values["end_step"]
            kwargs["end_step"] = None if is_none(v) else parse_int(v, f, minimum=0)
        by_mode[mode] = ModeSaveConfig(**kwargs)
    return SaveConfig(by_mode)


def _reduction_overrides(params: Mapping[str, Any]) -> dict[str, Any]:
    return {k: params[k] for k in _REDUCTION_KEYS if k in params}


def _build_reduction_config(values: Mapping[str, Any], where: str) -> ReductionConfig:
    reductions = _parse_reductions(values.get("reductions", ""), f"{where}.reductions")
    # smdebug: with reductions and no save_raw_tensor, only the reductions are saved.
    save_raw = parse_bool(values.get("save_raw_tensor"), not reductions, f"{where}.save_raw_tensor")
    save_shape = parse_bool(values.get("save_shape"), False, f"{where}.save_shape")
    return ReductionConfig(reductions, save_raw, save_shape)


def _scalar_safe(name: str, red: ReductionConfig) -> ReductionConfig:
    if name in SCALAR_COLLECTIONS:
        return ReductionConfig((), True, red.save_shape)
    return red


def _parse_reductions(value: Any, fieldname: str) -> tuple[Reduction, ...]:
    tokens = parse_str_list(value, fieldname)
    out: list[Reduction] = []
    for token in tokens:
        t = token.lower()
        is_abs = t.startswith("abs_")
        if is_abs:
            t = t[4:]
        if t.endswith("_norm"):
            t = t[: -len("_norm")]
            if t not in NORM_OPS:
                raise HookConfigError(fieldname, f"unknown norm {token!r}; expected l1_norm or l2_norm")
        elif t not in REDUCTION_OPS and t not in NORM_OPS:
            raise HookConfigError(fieldname, f"unknown reduction {token!r}; expected one of "
                                  f"{', '.join(REDUCTION_OPS)}, l1_norm, l2_norm (optionally abs_)")
        red = Reduction(t, is_abs)
        if red not in out:
            out.append(red)
    return tuple(out)
