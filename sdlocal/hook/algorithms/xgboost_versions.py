"""What differs between the SageMaker XGBoost container versions (aws/sagemaker-xgboost-container,
one branch per version: algorithm_mode/hyperparameter_validation.py, constants/xgb_constants.py,
metrics/custom_metrics.py, algorithm_mode/train.py, checkpointing.py), as data.

Each version's container pinned one xgboost (0.90, 1.0.0, 1.2.0, 1.3.3, 1.5.2, 1.7.4); sdlocal
trains with the installed xgboost 3.x and keeps what the user sees of the version asked for: its
hyperparameters and their errors, its metrics, its log lines, its model file.
"""
from __future__ import annotations

from dataclasses import dataclass

_BASE = frozenset({
    "_tuning_objective_metric", "alpha", "base_score", "booster", "colsample_bylevel", "colsample_bynode",
    "colsample_bytree", "csv_weights", "dsplit", "early_stopping_rounds", "eta", "eval_metric", "gamma",
    "grow_policy", "lambda", "lambda_bias", "max_bin", "max_delta_step", "max_depth", "max_leaves",
    "min_child_weight", "normalize_type", "nthread", "num_class", "num_round", "objective", "one_drop",
    "predictor", "process_type", "rate_drop", "refresh_leaf", "sample_type", "scale_pos_weight", "seed",
    "sketch_eps", "skip_drop", "subsample", "tree_method", "tweedie_variance_power", "updater", "verbosity",
})
_V090_1 = _BASE | {"silent"}
_V090_2 = _V090_1 | {"num_parallel_tree"}
_V100 = _V090_2 | {"interaction_constraints", "monotone_constraints", "save_model_on_termination"}
_V121 = (_V100 - {"silent"}) | {"_nfold", "aft_loss_distribution", "aft_loss_distribution_scale",
                               "deterministic_histogram", "single_precision_histogram"}
_V122 = (_V121 - {"_nfold"}) | {"_kfold", "_num_cv_round"}
_V131 = _V122 | {"prob_buffer_row", "sampling_method"}
_V151 = _V131 | {"use_dask_gpu_training"}
_V171 = _V151 - {"single_precision_histogram"}

_OBJ_090 = ("binary:logistic", "binary:logitraw", "binary:hinge", "count:poisson", "multi:softmax", "multi:softprob",
            "rank:pairwise", "rank:ndcg", "rank:map", "reg:linear", "reg:squarederror", "reg:logistic", "reg:gamma",
            "reg:tweedie", "survival:cox")
_OBJ_100 = _OBJ_090[:13] + ("reg:squaredlogerror",) + _OBJ_090[13:]
_OBJ_121 = ("aft_loss_distribution", "binary:logistic", "binary:logitraw", "binary:hinge", "count:poisson",
            "multi:softmax", "multi:softprob", "rank:pairwise", "rank:ndcg", "rank:map", "reg:linear",
            "reg:squarederror", "reg:logistic", "reg:gamma", "reg:pseudohubererror", "reg:squaredlogerror",
            "reg:tweedie", "survival:aft", "survival:cox")
_OBJ_171 = _OBJ_121[:16] + ("reg:absoluteerror",) + _OBJ_121[16:]

_MAX_090 = ("accuracy", "auc", "aucpr", "cox-nloglik", "f1", "gamma-nloglik", "map", "ndcg", "poisson-nloglik",
            "tweedie-nloglik")
_MIN_090 = ("error", "gamma-deviance", "logloss", "mae", "merror", "mlogloss", "mse", "rmse")
_MAX_100 = ("accuracy", "auc", "aucpr", "f1", "map", "ndcg")
_MIN_100 = ("cox-nloglik", "error", "gamma-deviance", "gamma-nloglik", "logloss", "mae", "merror", "mlogloss", "mse",
            "poisson-nloglik", "rmse", "rmsle", "tweedie-nloglik")
_MAX_121 = _MAX_100 + ("r2",)
_MIN_121 = ("aft-nloglik", "cox-nloglik", "error", "gamma-deviance", "gamma-nloglik", "interval-regression-accuracy",
            "logloss", "mae", "merror", "mlogloss", "mphe", "mse", "poisson-nloglik", "rmse", "rmsle", "tweedie-nloglik")
_MAX_122 = ("accuracy", "auc", "aucpr", "f1", "f1_binary", "f1_macro", "map", "ndcg", "r2")
_MAX_131 = ("accuracy", "auc", "aucpr", "balanced_accuracy", "f1", "f1_binary", "f1_macro", "map", "ndcg", "precision",
            "r2", "recall", "precision_macro", "precision_micro", "recall_macro", "recall_micro")
_MIN_131 = _MIN_121[:8] + ("mape",) + _MIN_121[8:]

_TREE_PLUGINS_090 = ("grow_colmaker", "distcol", "grow_histmaker", "grow_local_histmaker", "grow_skmaker", "sync",
                     "refresh", "prune")
_BUILD_PLUGINS_090 = ("grow_colmaker", "distcol", "grow_histmaker", "grow_local_histmaker", "grow_colmaker")


@dataclass(frozen=True)
class VersionTraits:
    name: str
    hyperparameters: frozenset[str]
    objectives: tuple[str, ...]
    tree_methods: tuple[str, ...]
    predictors: tuple[str, ...]
    gpu_refused: bool  # 0.90/1.0: "GPU training is not supported yet." for gpu_* tree_method/predictor
    tree_plugins: tuple[str, ...]  # updater: tree plugins, and those that grow trees (one at most)
    build_plugins: tuple[str, ...]
    maximize_metrics: tuple[str, ...]
    minimize_metrics: tuple[str, ...]
    custom_metrics: tuple[str, ...]  # computed by the container (sklearn) rather than xgboost
    aft_check: bool  # eval_metric aft-nloglik only with survival:aft (1.2-1+)
    pickled_model: bool  # xgboost-model is the pickled Booster (up to 1.2-2), else Booster.save_model
    debugger: bool  # the built-in Debugger hook (smdebug) is there (0.90-2+)
    metric_format: str  # "%g" (xgboost 0.90's _fmt_metric) or ".5f"
    legacy_monitor: bool  # up to 1.2-2: xgboost's builtin metrics first, then the container's custom ones
    early_stopping: str  # "native" (xgb.train's early_stopping_rounds, up to 1.2-2) or "callback" (1.3-1+)

    @property
    def eval_metrics(self) -> tuple[str, ...]:
        return self.maximize_metrics + self.minimize_metrics


def _traits(name: str, hps: frozenset[str], objectives: tuple[str, ...], maximize: tuple[str, ...],
            minimize: tuple[str, ...], custom: tuple[str, ...], *, old_gpu: bool, local_histmaker: bool,
            quantile: bool) -> VersionTraits:
    tree = _TREE_PLUGINS_090 if local_histmaker else tuple(p for p in _TREE_PLUGINS_090 if p != "grow_local_histmaker")
    build = _BUILD_PLUGINS_090 if local_histmaker else tuple(p for p in _BUILD_PLUGINS_090 if p != "grow_local_histmaker")
    if quantile:
        tree, build = tree + ("grow_quantile_histmaker",), build + ("grow_quantile_histmaker",)
    new = name not in ("0.90-1", "0.90-2", "1.0-1", "1.2-1", "1.2-2")
    return VersionTraits(
        name=name, hyperparameters=hps, objectives=objectives,
        tree_methods=("auto", "exact", "approx", "hist") + (() if old_gpu else ("gpu_hist",)),
        predictors=("cpu_predictor",) if old_gpu else ("auto", "cpu_predictor", "gpu_predictor"),
        gpu_refused=old_gpu, tree_plugins=tree, build_plugins=build, maximize_metrics=maximize,
        minimize_metrics=minimize, custom_metrics=custom, aft_check=not old_gpu, pickled_model=not new,
        debugger=name != "0.90-1", metric_format="%g" if name.startswith("0.90") else ".5f",
        legacy_monitor=not new, early_stopping="callback" if new else "native",
    )


_CUSTOM_090 = ("accuracy", "f1", "mse")
_CUSTOM_122 = ("accuracy", "f1", "f1_binary", "f1_macro", "mse", "r2")
_CUSTOM_131 = ("accuracy", "balanced_accuracy", "f1", "f1_binary", "f1_macro", "mse", "rmse", "mae", "precision",
               "precision_macro", "precision_micro", "r2", "recall", "recall_macro", "recall_micro")

VERSIONS: dict[str, VersionTraits] = {t.name: t for t in (
    _traits("0.90-1", _V090_1, _OBJ_090, _MAX_090, _MIN_090, _CUSTOM_090, old_gpu=True, local_histmaker=True,
            quantile=False),
    _traits("0.90-2", _V090_2, _OBJ_090, _MAX_090, _MIN_090, _CUSTOM_090, old_gpu=True, local_histmaker=True,
            quantile=False),
    _traits("1.0-1", _V100, _OBJ_100, _MAX_100, _MIN_100, _CUSTOM_090, old_gpu=True, local_histmaker=True,
            quantile=True),
    _traits("1.2-1", _V121, _OBJ_121, _MAX_121, _MIN_121, ("accuracy", "f1", "mse", "r2"), old_gpu=False,
            local_histmaker=True, quantile=True),
    _traits("1.2-2", _V122, _OBJ_121, _MAX_122, _MIN_121, _CUSTOM_122, old_gpu=False, local_histmaker=True,
            quantile=True),
    _traits("1.3-1", _V131, _OBJ_121, _MAX_131, _MIN_131, _CUSTOM_131, old_gpu=False, local_histmaker=True,
            quantile=True),
    _traits("1.5-1", _V151, _OBJ_121, _MAX_131, _MIN_131, _CUSTOM_131, old_gpu=False, local_histmaker=True,
            quantile=True),
    _traits("1.7-1", _V171, _OBJ_171, _MAX_131, _MIN_131, _CUSTOM_131, old_gpu=False, local_histmaker=False,
            quantile=True),
)}


# the tab of xgboost's evaluation line as CloudWatch Logs shows it (xgboost_metrics.py)
TAB = "#011"
NUMBER = r"([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"


def metric_definitions(traits: VersionTraits) -> list[dict[str, str]]:
    """`MetricDefinitions` for the version's metrics, `train:<m>` and `validation:<m>`. The container
    declares `validation:<m>` as `.*\\[[0-9]+\\].*#011validation-<m>:(\\S+)` (algorithm_mode/metrics.py),
    whose `\\S+` also takes the rest of the line when another metric follows (`#011` is no space): these
    capture the number only."""
    return [{"Name": f"{data}:{m}", "Regex": f".*\\[[0-9]+\\].*{TAB}{data}-{m}:{NUMBER}"}
            for data in ("train", "validation") for m in traits.eval_metrics]
