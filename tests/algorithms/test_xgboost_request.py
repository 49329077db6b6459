"""Validating an XGBoost algorithm request as the container of each version does (hyperparameters,
channels), the container's own metrics, and its evaluation line, in-process."""
from __future__ import annotations

import re

import numpy as np
import pytest

from sdlocal.hook.algorithms.errors import UserError
from sdlocal.hook.algorithms.xgboost_metrics import custom_metric_value, format_line, metric_definitions
from sdlocal.hook.algorithms.xgboost_request import parse_content_type, validate_xgboost_request
from sdlocal.hook.algorithms.xgboost_train import eval_metrics, xgboost_params
from sdlocal.hook.algorithms.xgboost_versions import VERSIONS

TRAIN = {"train": {"ContentType": "text/csv", "TrainingInputMode": "File", "S3DistributionType": "FullyReplicated"}}


@pytest.mark.parametrize(("version", "hps", "message", "field"), [
    ("1.7-1", {}, "Missing required hyperparameter: num_round", "HyperParameters.num_round"),
    ("1.7-1", {"num_round": "5", "silent": "0"}, "Extraneous hyperparameter found: silent", "HyperParameters.silent"),
    ("1.7-1", {"num_round": "ten"}, "Hyperparameter num_round: could not parse value (caused by ValueError)",
     "HyperParameters.num_round"),
    ("1.7-1", {"num_round": "0"}, "Hyperparameter num_round: 0 is not in [1, +inf)", "HyperParameters.num_round"),
    ("1.7-1", {"num_round": "5", "learning_rate": "1.5"}, "Hyperparameter eta: 1.5 is not in [0, 1]",
     "HyperParameters.eta"),
    ("1.7-1", {"num_round": "5", "subsample": "0"}, "Hyperparameter subsample: 0.0 is not in (0, 1]",
     "HyperParameters.subsample"),
    ("1.7-1", {"num_round": "5", "max_depth": "-1"}, "Hyperparameter max_depth: -1 is not in [0, +inf)",
     "HyperParameters.max_depth"),
    ("1.7-1", {"num_round": "5", "objective": "reg:nonsense"}, "Hyperparameter objective: reg:nonsense is not in [",
     "HyperParameters.objective"),
    ("1.5-1", {"num_round": "5", "objective": "reg:absoluteerror"},
     "Hyperparameter objective: reg:absoluteerror is not in [", "HyperParameters.objective"),
    ("1.7-1", {"num_round": "5", "objective": "multi:softprob"},
     "Require input for parameter 'num_class' for multi-classification", "HyperParameters.num_class"),
    ("1.7-1", {"num_round": "5", "eval_metric": "auc"},
     "Metric 'auc' can only be applied for classification and ranking problems.", "HyperParameters.eval_metric"),
    ("1.7-1", {"num_round": "5", "eval_metric": "rmse,wrong"}, "Hyperparameter eval_metric: value ['rmse', 'wrong'] "
     "not in range [", "HyperParameters.eval_metric"),
    ("1.7-1", {"num_round": "5", "eval_metric": "rmse@0.5"}, "Metric 'rmse@0.5' is not supported.",
     "HyperParameters.eval_metric"),
    ("1.7-1", {"num_round": "5", "early_stopping_rounds": "0"},
     "Hyperparameter early_stopping_rounds: 0 is not in [1, +inf)", "HyperParameters.early_stopping_rounds"),
    ("1.7-1", {"num_round": "5", "csv_weights": "2"}, "Hyperparameter csv_weights: 2 is not in [0, 1]",
     "HyperParameters.csv_weights"),
    ("1.7-1", {"num_round": "5", "booster": "gbforest"},
     "Hyperparameter booster: gbforest is not in ['gbtree', 'gblinear', 'dart']", "HyperParameters.booster"),
    ("1.7-1", {"num_round": "5", "monotone_constraints": "(1,0)"}, "monotone_constraints can be used only when the "
     "tree_method parameter is set to either 'exact' or 'hist'.", "HyperParameters.monotone_constraints"),
    ("1.7-1", {"num_round": "5", "updater": "grow_colmaker,grow_histmaker"},
     "Only one tree grow plugin can be selected.", "HyperParameters.updater"),
    ("1.7-1", {"num_round": "5", "num_class": "1"}, "Hyperparameter num_class: 1 is not in [2, +inf)",
     "HyperParameters.num_class"),
    ("1.0-1", {"num_round": "5", "tree_method": "gpu_hist"}, "GPU training is not supported yet.",
     "HyperParameters.tree_method"),
    ("1.2-1", {"num_round": "5", "eval_metric": "aft-nloglik"},
     "Metric 'aft-nloglik' can only be applied for 'survival:aft' objective.", "HyperParameters.eval_metric"),
    ("0.90-2", {"num_round": "5", "eval_metric": "r2"}, "Hyperparameter eval_metric: value ['r2'] not in range",
     "HyperParameters.eval_metric"),
    ("0.90-1", {"num_round": "5", "num_parallel_tree": "2"}, "Extraneous hyperparameter found: num_parallel_tree",
     "HyperParameters.num_parallel_tree"),
    ("1.7-1", {"num_round": "5", "_kfold": "5"}, "Hyperparameter _kfold: the container's cross-validation mode is not run by sdlocal",
     "HyperParameters._kfold"),
])
def test_hyperparameter_errors_are_the_containers(version: str, hps: dict[str, str], message: str, field: str) -> None:
    with pytest.raises(UserError) as e:
        validate_xgboost_request(version, hps, TRAIN)
    assert e.value.message.startswith(message), e.value.message
    assert e.value.field == field and "\n" not in e.value.one_line()


def test_notebook_hyperparameters_per_version() -> None:
    notebook = {"max_depth": "5", "eta": "0.2", "gamma": "4", "min_child_weight": "6", "subsample": "0.7",
                "silent": "0", "objective": "reg:squarederror", "num_round": "51"}
    request = validate_xgboost_request("0.90-2", notebook, TRAIN)  # the notebook's version takes `silent`
    assert request.hyperparameters == {"max_depth": 5, "eta": 0.2, "gamma": 4.0, "min_child_weight": 6.0,
                                       "subsample": 0.7, "silent": 0, "objective": "reg:squarederror",
                                       "num_round": 51}
    with pytest.raises(UserError, match="Extraneous hyperparameter found: silent"):
        validate_xgboost_request("1.2-1", notebook, TRAIN)  # removed in 1.2-1
    hps = validate_xgboost_request("1.7-1", {"num_round": "3", "reg_alpha": "1", "eval_metric": "rmse,mae",
                                             "updater": "grow_quantile_histmaker,prune"}, TRAIN).hyperparameters
    assert hps == {"num_round": 3, "alpha": 1.0, "eval_metric": ["rmse", "mae"],
                   "updater": "grow_quantile_histmaker,prune"}


@pytest.mark.parametrize(("channels", "message", "field"), [
    ({}, "Missing required channel: train", "InputDataConfig.train"),
    ({**TRAIN, "test": {"ContentType": "text/csv"}}, "Extraneous channel found: test", "InputDataConfig.test"),
    ({"train": {"ContentType": "application/x-recordio-protobuf", "TrainingInputMode": "File"}},
     "Channel train: ContentType application/x-recordio-protobuf is not read by sdlocal's XGBoost algorithm",
     "InputDataConfig.train.ContentType"),
    ({"train": {"ContentType": "text/csv", "TrainingInputMode": "Pipe"}},
     "Channel train: TrainingInputMode Pipe is not supported by sdlocal's XGBoost algorithm",
     "InputDataConfig.train.InputMode"),
    ({"train": {"ContentType": "image/jpeg"}}, "image/jpeg is not an accepted ContentType: csv, libsvm,",
     "InputDataConfig.train.ContentType"),
    ({"train": {"ContentType": "text/csv; label_size=2"}}, "text/csv; label_size=2 is not an accepted csv ContentType",
     "InputDataConfig.train.ContentType"),
    ({**TRAIN, "validation": {"ContentType": "application/json"}}, "application/json is not an accepted ContentType",
     "InputDataConfig.validation.ContentType"),
])
def test_channel_errors(channels: dict, message: str, field: str) -> None:
    with pytest.raises(UserError) as e:
        validate_xgboost_request("1.7-1", {"num_round": "2"}, channels)
    assert e.value.message.startswith(message) and e.value.field == field


def test_content_types() -> None:
    assert [parse_content_type(t) for t in ("text/csv", "text/csv; label_size=1", "CSV", "text/libsvm",
                                            "text/x-libsvm", "libsvm", None, "application/x-parquet")] == \
        ["csv", "csv", "csv", "libsvm", "libsvm", "libsvm", "libsvm", "parquet"]
    request = validate_xgboost_request("1.7-1", {"num_round": "2"}, {"train": {}, "code": {"ContentType": "text/python"}})
    assert request.content_type == "libsvm" and list(request.channels) == ["train"]  # the container's default


def test_the_containers_own_metrics() -> None:
    labels = np.array([0, 1, 1, 0, 1, 2], dtype=float)
    margins = np.array([[2, 0, 0], [0, 3, 0], [0, 0, 1], [1, 0, 0], [0, 2, 1], [0, 0, 4]], dtype=float)  # argmax
    pred = np.array([0, 1, 2, 0, 1, 2])
    assert custom_metric_value("accuracy", margins, labels) == pytest.approx(5 / 6)
    # class 1: precision 2/2, recall 2/3; class 2: precision 1/2, recall 1/1; class 0: 1, 1
    f1 = [1.0, 2 * 1 * (2 / 3) / (1 + 2 / 3), 2 * 0.5 / 1.5]
    assert custom_metric_value("f1", margins, labels) == pytest.approx(np.mean(f1))
    assert custom_metric_value("precision_macro", margins, labels) == pytest.approx((1 + 1 + 0.5) / 3)
    assert custom_metric_value("balanced_accuracy", margins, labels) == pytest.approx((1 + 2 / 3 + 1) / 3)
    assert custom_metric_value("recall_micro", margins, labels) == pytest.approx(np.mean(pred == labels))
    with pytest.raises(UserError, match="Target is multiclass but average='binary'"):
        custom_metric_value("f1_binary", margins, labels)
    binary = np.array([-1.0, 2.0, 0.5, -0.2]), np.array([0.0, 1.0, 0.0, 1.0])  # margins > 0 are class 1
    assert custom_metric_value("precision", *binary) == pytest.approx(0.5)
    assert custom_metric_value("recall", *binary) == pytest.approx(0.5)
    y, p = np.array([1.0, 2.0, 3.0]), np.array([1.5, 2.0, 2.0])
    assert custom_metric_value("mse", p, y) == pytest.approx((0.25 + 1) / 3)
    assert custom_metric_value("r2", p, y) == pytest.approx(1 - 1.25 / 2)


def test_eval_metric_split_and_params() -> None:
    t = VERSIONS["1.7-1"]
    assert eval_metrics(t, None, ["logloss", "accuracy"]) == (["logloss"], ["accuracy"], None)
    assert eval_metrics(t, "validation:auc", ["logloss"]) == (["auc", "logloss"], [], ["auc"])
    assert eval_metrics(VERSIONS["1.2-2"], None, ["rmse"]) == (["rmse"], [], None)  # rmse became custom in 1.3-1
    assert eval_metrics(t, None, ["rmse"]) == (None, ["rmse"], None)
    params = xgboost_params({"predictor": "cpu_predictor", "tree_method": "gpu_hist", "csv_weights": 1, "eta": 0.1,
                             "interaction_constraints": [[0, 1]]})
    assert params == {"tree_method": "hist", "device": "cuda", "eta": 0.1, "interaction_constraints": "[[0, 1]]"}


def test_evaluation_lines_and_metric_definitions() -> None:
    log = {"train": {"rmse": [3.0, 2.123456], "mse": [1.0, 4.5]}, "validation": {"rmse": [3.5, 2.5], "mse": [2, 6.25]}}
    assert format_line(1, log, VERSIONS["1.7-1"], ["mse"]) == \
        "[1]#011train-rmse:2.12346#011train-mse:4.50000#011validation-rmse:2.50000#011validation-mse:6.25000"
    assert format_line(1, log, VERSIONS["1.0-1"], ["mse"]) == \
        "[1]#011train-rmse:2.12346#011validation-rmse:2.50000#011train-mse:4.50000#011validation-mse:6.25000"
    assert format_line(1, log, VERSIONS["0.90-2"], ["mse"]).startswith("[1]#011train-rmse:2.12346#011validation-rmse:2.5#")
    definitions = {d["Name"]: re.compile(d["Regex"]) for d in metric_definitions(VERSIONS["1.7-1"])}
    line = format_line(1, log, VERSIONS["1.7-1"], ["mse"])
    assert definitions["validation:rmse"].match(line).group(1) == "2.50000"  # type: ignore[union-attr]
    assert definitions["train:mse"].match(line).group(1) == "4.50000"  # type: ignore[union-attr]
