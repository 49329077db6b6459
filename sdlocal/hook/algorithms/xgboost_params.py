"""The XGBoost container's hyperparameters: their types, ranges and dependencies, validated in the
container's order with its messages (sagemaker_algorithm_toolkit.hyperparameter_validation and
sagemaker_xgboost_container/algorithm_mode/hyperparameter_validation.py): aliases replaced,
`Missing required hyperparameter: num_round`, `Extraneous hyperparameter found: X`,
`Hyperparameter X: could not parse value`, `Hyperparameter eta: 2.0 is not in [0, 1]`, then the
dependencies (num_class for multi:*, auc only for binary:/rank:, ...). No default is filled in:
what is not given is xgboost's default (objective reg:squarederror, eta 0.3, max_depth 6, ...).
"""
from __future__ import annotations

import ast
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sdlocal.hook.algorithms.errors import UserError
from sdlocal.hook.algorithms.xgboost_versions import VersionTraits

INF = math.inf
ALIASES = {"learning_rate": "eta", "min_split_loss": "gamma", "reg_lambda": "lambda", "reg_alpha": "alpha"}
DEFAULT_OBJECTIVE = "reg:squarederror"  # xgboost's, when the request sets none


@dataclass(frozen=True)
class Interval:
    low: float = -INF
    high: float = INF
    low_open: bool = False
    high_open: bool = False
    text: str = ""  # the toolkit's str(Interval): "[0, 1]", "(0, +inf)"

    def __contains__(self, value: object) -> bool:
        v = float(value)  # type: ignore[arg-type]
        return not (v < self.low or (self.low_open and v <= self.low) or v > self.high
                    or (self.high_open and v >= self.high))

    def __str__(self) -> str:
        return self.text


def _iv(text: str) -> Interval:
    """An Interval from the toolkit's own spelling: `[0, 1]`, `(0, +inf)`, `[1, +inf)`."""
    low, high = (s.strip() for s in text[1:-1].split(","))
    return Interval(float(low) if low != "-inf" else -INF, float(high) if high != "+inf" else INF,
                    text[0] == "(", text[-1] == ")", text)


@dataclass(frozen=True)
class Spec:
    kind: str  # int, float, cat, list (comma-separated), tuple, nested
    range: Interval | tuple[Any, ...] | None = None
    required: bool = False


_NON_NEGATIVE = _iv("[0, +inf)")
_UNIT = _iv("[0, 1]")
_OPEN_UNIT = _iv("(0, 1]")
_TRUE_FALSE = ("true", "false")
SPECS: dict[str, Spec] = {
    "num_round": Spec("int", _iv("[1, +inf)"), required=True),
    "csv_weights": Spec("int", _iv("[0, 1]")),
    "early_stopping_rounds": Spec("int", _iv("[1, +inf)")),
    "booster": Spec("cat", ("gbtree", "gblinear", "dart")),
    "verbosity": Spec("int", _iv("[0, 3]")),
    "silent": Spec("int", _iv("[0, 1]")),
    "nthread": Spec("int", _iv("[1, +inf)")),
    "eta": Spec("float", _UNIT),
    "gamma": Spec("float", _NON_NEGATIVE),
    "max_depth": Spec("int", _NON_NEGATIVE),
    "min_child_weight": Spec("float", _NON_NEGATIVE),
    "max_delta_step": Spec("float", _NON_NEGATIVE),
    "subsample": Spec("float", _OPEN_UNIT),
    "colsample_bytree": Spec("float", _OPEN_UNIT),
    "colsample_bylevel": Spec("float", _OPEN_UNIT),
    "colsample_bynode": Spec("float", _OPEN_UNIT),
    "lambda": Spec("float", _NON_NEGATIVE),
    "alpha": Spec("float", _NON_NEGATIVE),
    "tree_method": Spec("cat"),  # the version's tree methods
    "sketch_eps": Spec("float", _iv("(0, 1)")),
    "scale_pos_weight": Spec("float", _iv("(0, +inf)")),
    "updater": Spec("list"),  # the version's plugins
    "dsplit": Spec("cat", ("row", "col")),
    "refresh_leaf": Spec("int", _iv("[0, 1]")),
    "process_type": Spec("cat", ("default", "update")),
    "grow_policy": Spec("cat", ("depthwise", "lossguide")),
    "max_leaves": Spec("int", _NON_NEGATIVE),
    "max_bin": Spec("int", _NON_NEGATIVE),
    "predictor": Spec("cat"),
    "monotone_constraints": Spec("tuple", (-1, 0, 1)),
    "interaction_constraints": Spec("nested", _iv("[1, +inf)")),
    "sample_type": Spec("cat", ("uniform", "weighted")),
    "normalize_type": Spec("cat", ("tree", "forest")),
    "rate_drop": Spec("float", _UNIT),
    "one_drop": Spec("int", _iv("[0, 1]")),
    "skip_drop": Spec("float", _UNIT),
    "lambda_bias": Spec("float", _UNIT),
    "tweedie_variance_power": Spec("float", _iv("(1, 2)")),
    "objective": Spec("cat"),
    "num_class": Spec("int", _iv("[2, +inf)")),
    "base_score": Spec("float", _NON_NEGATIVE),
    "_nfold": Spec("int", _iv("[2, +inf)")),
    "_kfold": Spec("int", _iv("[2, +inf)")),
    "_num_cv_round": Spec("int", _iv("[1, +inf)")),
    "_tuning_objective_metric": Spec("cat"),  # validation:<metric>
    "eval_metric": Spec("list"),
    "seed": Spec("int", _iv("(-2147483648, 2147483647)")),
    "num_parallel_tree": Spec("int", _iv("[1, +inf)")),
    "save_model_on_termination": Spec("cat", _TRUE_FALSE),
    "aft_loss_distribution": Spec("cat", ("normal", "logistic", "extreme")),
    "aft_loss_distribution_scale": Spec("float", _NON_NEGATIVE),
    "deterministic_histogram": Spec("cat", _TRUE_FALSE),
    "single_precision_histogram": Spec("cat", _TRUE_FALSE),
    "sampling_method": Spec("cat", ("uniform", "gradient_based")),
    "prob_buffer_row": Spec("int", _iv("(1.0, +inf)")),
    "use_dask_gpu_training": Spec("cat", _TRUE_FALSE),
}
# dependencies are checked in this order, after every range (the toolkit's topological order)
_DEPENDENT = ("updater", "objective", "eval_metric", "monotone_constraints", "interaction_constraints",
              "tree_method", "predictor")


def _err(message: str, name: str) -> UserError:
    return UserError(message, f"HyperParameters.{name}")


def _parse(name: str, spec: Spec, value: Any) -> Any:
    text = value if isinstance(value, str) else str(value)
    if spec.kind == "int":
        return int(text)
    if spec.kind == "float":
        return float(text)
    if spec.kind == "list":
        return text.split(",")
    if spec.kind in ("tuple", "nested"):
        parsed = ast.literal_eval(text)
        if spec.kind == "tuple" and not isinstance(parsed, tuple):
            parsed = tuple(parsed) if isinstance(parsed, list) else (parsed,)
        if spec.kind == "nested" and not (isinstance(parsed, list) and all(isinstance(x, list) for x in parsed)):
            raise ValueError("not a list of lists")
        return parsed
    return text


def _eval_metric_ok(traits: VersionTraits, metric: str) -> bool:
    if "<function" in metric:
        raise _err(f"User defined evaluation metric {metric} is not supported yet.", "eval_metric")
    if "@" in metric:
        name, threshold = (s.strip() for s in metric.split("@", 1))
        if name not in ("error", "ndcg", "map"):
            raise _err(f"Metric '{metric}' is not supported. Parameter 'eval_metric' with customized threshold should "
                       "be one of these options: 'error', 'ndcg', 'map'.", "eval_metric")
        try:
            float(threshold)
        except ValueError:
            raise _err(f"Threshold value 't' in '{name}@t' expects float input.", "eval_metric") from None
        return True
    return metric in traits.eval_metrics


def _check_range(traits: VersionTraits, name: str, spec: Spec, value: Any) -> None:
    choices: tuple[Any, ...] | Interval | None = spec.range
    if name == "tree_method":
        choices = traits.tree_methods
    elif name == "predictor":
        choices = traits.predictors
    elif name == "objective":
        choices = traits.objectives
    elif name == "_tuning_objective_metric":
        choices = tuple(f"validation:{m}" for m in traits.eval_metrics)
    if traits.gpu_refused and name in ("tree_method", "predictor") and "gpu" in value:
        raise _err("GPU training is not supported yet.", name)
    if name == "eval_metric":
        if not all(_eval_metric_ok(traits, m) for m in value):
            raise _err(f"Hyperparameter {name}: value {value} not in range {list(traits.eval_metrics)}", name)
        return
    if name == "updater":
        allowed = traits.tree_plugins + ("shotgun", "coord_descent")
        if any(v not in allowed for v in value):
            raise _err(f"Hyperparameter {name}: value {value} not in range {list(allowed)}", name)
        return
    if spec.kind == "tuple":
        if any(v not in choices for v in value):  # type: ignore[operator]
            raise _err(f"Hyperparameter {name}: value {value} not in range {list(choices) if isinstance(choices, tuple) else choices}", name)
        return
    if spec.kind == "nested":
        if any(v not in choices for outer in value for v in outer):  # type: ignore[operator]
            raise _err(f"Hyperparameter {name}: value {value} not in range {choices}", name)
        return
    if choices is not None and value not in choices:
        shown = choices if isinstance(choices, Interval) else list(choices)
        raise _err(f"Hyperparameter {name}: {value} is not in {shown}", name)


def _updater_dependencies(traits: VersionTraits, value: list[str], hps: Mapping[str, Any]) -> None:
    if hps.get("booster") == "gblinear":
        if not (len(value) == 1 and value[0] in ("shotgun", "coord_descent")):
            raise _err("Linear updater should be one of these options: 'shotgun', 'coord_descent'.", "updater")
    elif hps.get("process_type") == "update":
        if not all(x in ("refresh", "prune") for x in value):
            raise _err("process_type 'update' can only be used with updater 'refresh' and 'prune'", "updater")
    else:
        if not all(x in traits.tree_plugins for x in value):
            raise _err("Tree updater should be selected from these options: "
                       + ", ".join(f"'{p}'" for p in traits.tree_plugins) + ".", "updater")
        if sum(1 for x in value if x in traits.build_plugins) > 1:
            raise _err("Only one tree grow plugin can be selected. Choose one from the following: "
                       + ", ".join(f"'{p}'" for p in dict.fromkeys(traits.build_plugins)), "updater")


def _check_dependencies(traits: VersionTraits, name: str, value: Any, hps: Mapping[str, Any]) -> None:
    tree_method = hps.get("tree_method")
    if name == "updater":
        _updater_dependencies(traits, value, hps)
    elif name == "objective":
        if value in ("multi:softmax", "multi:softprob") and hps.get("num_class") is None:
            raise _err("Require input for parameter 'num_class' for multi-classification", "num_class")
    elif name == "eval_metric":
        objective = hps.get("objective", DEFAULT_OBJECTIVE)
        if "auc" in value and not objective.startswith(("binary:", "rank:")):
            raise _err("Metric 'auc' can only be applied for classification and ranking problems.", name)
        if traits.aft_check and "aft-nloglik" in value and objective != "survival:aft":
            raise _err("Metric 'aft-nloglik' can only be applied for 'survival:aft' objective.", name)
    elif name == "monotone_constraints" and tree_method not in ("exact", "hist"):
        raise _err("monotone_constraints can be used only when the tree_method parameter is set to either "
                   "'exact' or 'hist'.", name)
    elif name == "interaction_constraints" and tree_method not in ("exact", "hist", "approx"):
        raise _err("interaction_constraints can be used only when the tree_method parameter is set to either "
                   "'exact', 'hist' or 'approx'.", name)


def validate_hyperparameters(traits: VersionTraits, given: Mapping[str, Any]) -> dict[str, Any]:
    """The request's hyperparameters (strings, as in hyperparameters.json) checked and parsed as the
    version's container does; the parsed values (`updater` joined back with commas)."""
    hps = {ALIASES.get(k, k): v for k, v in given.items()}
    for name, spec in SPECS.items():
        if spec.required and name in traits.hyperparameters and name not in hps:
            raise _err(f"Missing required hyperparameter: {name}", name)
    parsed: dict[str, Any] = {}
    for name, value in hps.items():
        if name not in traits.hyperparameters:
            raise _err(f"Extraneous hyperparameter found: {name}", name)
        try:
            parsed[name] = _parse(name, SPECS[name], value)
        except (ValueError, SyntaxError, TypeError) as e:
            raise _err(f"Hyperparameter {name}: could not parse value (caused by {type(e).__name__})", name) from None
    for name, value in parsed.items():
        _check_range(traits, name, SPECS[name], value)
    for name in _DEPENDENT:
        if name in parsed:
            _check_dependencies(traits, name, parsed[name], parsed)
    if "updater" in parsed:
        parsed["updater"] = ",".join(parsed["updater"])
    return parsed

