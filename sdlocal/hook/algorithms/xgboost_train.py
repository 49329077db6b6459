"""Train as the container's algorithm mode does (algorithm_mode/train.py, callback.py): the
validated hyperparameters as xgboost's params, `train` and `validation` as the evaluation sets,
the evaluation line each round, early stopping, the built-in Debugger hook (sdlocal's XGBoost hook,
hook/xgboost.py, given the params, the train data and the validation data), and the model saved as
`<model dir>/xgboost-model`.

Version differences handled here (the container pinned xgboost 0.90 ... 1.7.4, this runs xgboost 3):
- hyperparameters xgboost 3 removed (predictor, silent, dsplit, sketch_eps, lambda_bias,
  single_precision_histogram, deterministic_histogram, prob_buffer_row) are accepted and not passed
  on (said once in the log); `tree_method=gpu_hist` is `hist` on `device=cuda`;
- the container's own metrics (accuracy, f1, r2, ...) get the raw margins, as xgboost 1.x's `feval`
  gave them (xgboost 3's `custom_metric` gets transformed predictions);
- the model file: up to 1.2-2 the pickled Booster (`pickle.load`), from 1.3-1 `Booster.save_model`
  (load it with `xgboost.Booster().load_model("xgboost-model")`): xgboost 3 writes UBJSON there
  (1.3-1 to 1.7-1 wrote xgboost's old binary format, which xgboost 3 can no longer write).
"""
from __future__ import annotations

import logging
import pickle
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import xgboost as xgb

from sdlocal.hook.algorithms.errors import AlgorithmError, UserError
from sdlocal.hook.algorithms.xgboost_metrics import MarginSource, MetricLines, custom_metric
from sdlocal.hook.algorithms.xgboost_versions import VersionTraits

logger = logging.getLogger(__name__)
MODEL_NAME = "xgboost-model"
REMOVED_IN_XGBOOST_3 = ("predictor", "silent", "dsplit", "sketch_eps", "lambda_bias", "single_precision_histogram",
                        "deterministic_histogram", "prob_buffer_row")
_NOT_XGBOOST_PARAMS = ("csv_weights", "early_stopping_rounds")
# xgboost messages that are the request's or the data's fault (constants/xgb_constants.py CUSTOMER_ERRORS)
CUSTOMER_ERRORS = (
    "label must be in [0,1] for logistic regression", "label must be in [0, num_class)",
    "Target is multiclass but average='binary'", "feature_names mismatch",
    "Check failed: preds.size() == info.labels_.size()", "the dataset only contains pos or neg samples",
    "base_score must be in (0,1) for logistic loss", "label must be nonnegative",
    "Parameter reg_lambda should be greater equal to 0",
    # xgboost 3's wording of the same faults
    "label must be discrete values in the range of [0, num_class)", "Invalid shape of labels",
    "base_score must be in (0,1) for the logistic loss",
)
_LOG_PREFIX = re.compile(r"^\[[0-9:]+\] \S+:\d+: ")  # xgboost's "[06:30:09] /workspace/src/...cu:114: "


def eval_metrics(traits: VersionTraits, tuning_metric: str | None, eval_metric: Sequence[str] | None
                 ) -> tuple[list[str] | None, list[str], list[str] | None]:
    """(xgboost's eval_metric, the container's own metrics, the tuning objective's metrics), as
    train_utils.get_eval_metrics_and_feval (order kept where the container went through a set)."""
    tuning = tuning_metric.split(":", 1)[1].split(",") if tuning_metric else None
    if tuning is None and eval_metric is None:
        return None, [], None
    union = sorted(set(tuning or ()) | set(eval_metric or ())) if tuning and eval_metric else list(tuning or eval_metric or ())
    custom = [m for m in union if m in traits.custom_metrics]
    return [m for m in union if m not in custom] or None, custom, tuning


def xgboost_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The validated hyperparameters as xgboost 3's params."""
    params = {k: v for k, v in cfg.items() if k not in _NOT_XGBOOST_PARAMS and k not in REMOVED_IN_XGBOOST_3}
    removed = [k for k in REMOVED_IN_XGBOOST_3 if k in cfg]
    if removed:
        logger.info("Hyperparameters %s have no effect with xgboost %s (removed after xgboost 1.x)",
                    ", ".join(removed), xgb.__version__)
    if cfg.get("silent") == 1 and "verbosity" not in cfg:
        params["verbosity"] = 0
    if params.get("tree_method") == "gpu_hist":
        params.update(tree_method="hist", device="cuda")
    if "interaction_constraints" in params:
        params["interaction_constraints"] = str(params["interaction_constraints"])
    return params


def save_model(booster: xgb.Booster, model_dir: Path, traits: VersionTraits, name: str = MODEL_NAME) -> Path:
    model_dir.mkdir(parents=True, exist_ok=True)
    path = model_dir / name
    if traits.pickled_model:
        with path.open("wb") as f:
            pickle.dump(booster, f, protocol=4)
    else:
        path.write_bytes(bytes(booster.save_raw(raw_format="ubj")))
    return path


class SaveEachRound(xgb.callback.TrainingCallback):
    """save_model_on_termination=true: the model so far is in the model folder after every round."""

    def __init__(self, model_dir: Path, traits: VersionTraits) -> None:
        super().__init__()
        self.model_dir, self.traits = model_dir, traits

    def after_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
        save_model(model, self.model_dir, self.traits)
        return False


def _failure(e: Exception) -> Exception:
    lines = [line for line in str(e).splitlines() if line.strip() and not line.startswith("Stack trace")]
    first = _LOG_PREFIX.sub("", lines[0]) if lines else type(e).__name__
    if any(message in str(e) for message in CUSTOMER_ERRORS):
        return UserError(first)
    return AlgorithmError(f"XGB train call failed with exception: {first}")


def train_job(traits: VersionTraits, train_cfg: dict[str, Any], dtrain: xgb.DMatrix, dval: xgb.DMatrix | None,
              model_dir: Path, hook: Any = None) -> xgb.Booster:
    """Train and save the model; `hook`: the Debugger hook (hook.xgboost.Hook) or None."""
    cfg = dict(train_cfg)
    num_round = cfg.pop("num_round")
    save_each_round = cfg.pop("save_model_on_termination", "false") == "true"
    tuning_param = cfg.pop("_tuning_objective_metric", None)
    eval_metric = cfg.get("eval_metric")
    cleaned, custom, tuning = eval_metrics(traits, tuning_param, eval_metric)
    if cleaned:
        cfg["eval_metric"] = cleaned
    else:
        cfg.pop("eval_metric", None)
    if traits.name in ("0.90-1", "0.90-2", "1.0-1"):
        rounds = cfg.get("early_stopping_rounds")  # kept in the params there
    else:
        rounds = cfg.pop("early_stopping_rounds", None)
    logger.info("Train matrix has %d rows and %d columns", dtrain.num_row(), dtrain.num_col())
    if dval is not None:
        logger.info("Validation matrix has %d rows", dval.num_row())
    watchlist = [(dtrain, "train")] + ([(dval, "validation")] if dval is not None else [])
    source = MarginSource()
    callbacks: list[xgb.callback.TrainingCallback] = [source, MetricLines(traits, custom)]
    if save_each_round:
        callbacks.append(SaveEachRound(model_dir, traits))
    native_rounds = None
    if rounds and traits.early_stopping == "native":
        native_rounds = rounds  # xgb.train's: the last evaluation set, its last metric
    elif rounds and dval is not None:
        metric = tuning[-1] if tuning else (eval_metric[-1] if eval_metric else None)
        if metric:
            callbacks.append(xgb.callback.EarlyStopping(
                rounds=rounds, data_name="validation", metric_name=metric,
                maximize=metric in traits.maximize_metrics, save_best=True))
    if hook is not None:
        hook.hyperparameters = dict(cfg)
        hook.train_data = dtrain
        if dval is not None:
            hook.validation_data = dval
        callbacks.append(hook)
    try:
        booster = xgb.train(xgboost_params(cfg), dtrain, num_boost_round=num_round, evals=watchlist,
                            custom_metric=custom_metric(custom, source) if custom else None,
                            early_stopping_rounds=native_rounds, callbacks=callbacks, verbose_eval=False)
    except UserError:
        raise
    except (xgb.core.XGBoostError, ValueError) as e:
        raise _failure(e) from e
    save_model(booster, model_dir, traits)
    return booster
