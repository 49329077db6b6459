"""The XGBoost container's metrics: the ones it computes itself (metrics/custom_metrics.py, with
sklearn there, numpy here), the evaluation lines it prints, and the metric definitions SageMaker
reads from those lines.

The container prints xgboost's evaluation line each round, `[3]\\ttrain-rmse:1.23456\\tvalidation-rmse:...`;
SageMaker's log agent writes each tab as `#011` in CloudWatch Logs, where the algorithm's metric
regexes (`.*\\[[0-9]+\\].*#011validation-rmse:(\\S+)`, algorithm_mode/metrics.py) find them. sdlocal has
no such agent, so the runner prints the line as CloudWatch shows it, with `#011`: `sdlocal run`'s
log, `sdlocal serve`'s CloudWatch events and `fit(logs=True)` all read as on SageMaker.
"""
from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

import numpy as np
import xgboost as xgb

from sdlocal.hook.algorithms.errors import UserError
from sdlocal.hook.algorithms.xgboost_versions import (  # noqa: F401 - metric_definitions: also named here
    TAB,
    VersionTraits,
    metric_definitions,
)

MULTICLASS_BINARY_ERROR = ("Target is multiclass but average='binary'. Please choose another average setting, one of "
                           "[None, 'micro', 'macro', 'weighted'].")


def _class_labels(margins: np.ndarray) -> np.ndarray:
    """custom_metrics.margin_to_class_label: argmax of a row of margins, else margin > 0."""
    if margins.ndim > 1:
        return np.argmax(margins, axis=-1)
    return (margins > 0.0).astype(int)


def _confusion(y_true: np.ndarray, y_pred: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    labels = np.unique(np.concatenate([y_true, y_pred]))
    index = {v: i for i, v in enumerate(labels)}
    cm = np.zeros((len(labels), len(labels)))
    for t, p in zip(y_true, y_pred, strict=True):
        cm[index[t], index[p]] += 1
    return labels, cm


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    return np.divide(num, den, out=np.zeros_like(num, dtype=float), where=den > 0)


def _per_class(y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, Any]:
    labels, cm = _confusion(y_true, y_pred)
    tp = np.diag(cm)
    precision, recall = _ratio(tp, cm.sum(axis=0)), _ratio(tp, cm.sum(axis=1))
    f1 = _ratio(2 * precision * recall, precision + recall)
    return {"labels": labels, "cm": cm, "tp": tp, "precision": precision, "recall": recall, "f1": f1}


def _binary(kind: str) -> Callable[[np.ndarray, np.ndarray], float]:
    """sklearn's average='binary' (pos_label 1): an error for more than two classes."""
    def score(y_true: np.ndarray, y_pred: np.ndarray) -> float:
        if len(np.unique(np.concatenate([y_true, y_pred]))) > 2:
            raise UserError(MULTICLASS_BINARY_ERROR)
        t, p = y_true == 1, y_pred == 1
        tp = float(np.sum(t & p))
        precision = tp / np.sum(p) if np.sum(p) else 0.0
        recall = tp / np.sum(t) if np.sum(t) else 0.0
        if kind == "precision":
            return float(precision)
        if kind == "recall":
            return float(recall)
        return float(2 * precision * recall / (precision + recall)) if precision + recall else 0.0
    return score


def _micro(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    return float(np.mean(y_true == y_pred))  # micro precision == micro recall == accuracy (single label)


def _balanced(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    s = _per_class(y_true, y_pred)
    support = s["cm"].sum(axis=1)
    return float(np.mean(s["recall"][support > 0]))


_CLASSIFICATION: dict[str, Callable[[np.ndarray, np.ndarray], float]] = {
    "accuracy": _micro,
    "balanced_accuracy": _balanced,
    "f1": lambda t, p: float(np.mean(_per_class(t, p)["f1"])),
    "f1_macro": lambda t, p: float(np.mean(_per_class(t, p)["f1"])),
    "f1_binary": _binary("f1"),
    "precision": _binary("precision"),
    "recall": _binary("recall"),
    "precision_macro": lambda t, p: float(np.mean(_per_class(t, p)["precision"])),
    "recall_macro": lambda t, p: float(np.mean(_per_class(t, p)["recall"])),
    "precision_micro": _micro,
    "recall_micro": _micro,
}


def _r2(y: np.ndarray, p: np.ndarray) -> float:
    total = float(np.sum((y - np.mean(y)) ** 2))
    residual = float(np.sum((y - p) ** 2))
    if total == 0:
        return 1.0 if residual == 0 else 0.0
    return 1.0 - residual / total


_REGRESSION: dict[str, Callable[[np.ndarray, np.ndarray], float]] = {
    "mse": lambda y, p: float(np.mean((y - p) ** 2)),
    "rmse": lambda y, p: float(np.sqrt(np.mean((y - p) ** 2))),
    "mae": lambda y, p: float(np.mean(np.abs(y - p))),
    "r2": _r2,
}


def custom_metric_value(name: str, margins: np.ndarray, labels: np.ndarray) -> float:
    """One container-computed metric over raw margins (what xgboost 1.x gave the container's feval)."""
    if name in _REGRESSION:
        return _REGRESSION[name](labels.astype(float), margins.reshape(labels.shape).astype(float))
    if margins.size == 0:
        return 0.0
    return _CLASSIFICATION[name](labels.astype(int), _class_labels(margins))


class MarginSource(xgb.callback.TrainingCallback):
    """Holds the booster being trained, so the custom metrics see margins: xgboost 3 hands a
    custom metric transformed predictions (probabilities), the containers' feval got margins."""

    def __init__(self) -> None:
        super().__init__()
        self.model: xgb.Booster | None = None

    def before_training(self, model: Any) -> Any:
        self.model = model
        return model


def custom_metric(names: Sequence[str], source: MarginSource) -> Callable[[np.ndarray, xgb.DMatrix], list[tuple[str, float]]]:
    """The container's configure_feval: every custom metric of `names`, in that order."""
    def evaluate(_preds: np.ndarray, dmatrix: xgb.DMatrix) -> list[tuple[str, float]]:
        assert source.model is not None
        margins = np.asarray(source.model.predict(dmatrix, output_margin=True, validate_features=False))
        labels = dmatrix.get_label()
        return [(n, custom_metric_value(n, margins, labels)) for n in names]
    return evaluate


def format_line(epoch: int, evals_log: Mapping[str, Mapping[str, Sequence[Any]]], traits: VersionTraits,
                custom: Sequence[str] = ()) -> str:
    """The round's evaluation line with `#011` for the tabs. Up to 1.2-2 xgboost's metrics of every
    data set come before the container's own (the old eval string), then data set by data set."""
    def fmt(data: str, metric: str, log: Sequence[Any]) -> str:
        last = log[-1]
        score = float(last[0] if isinstance(last, tuple) else last)
        value = f"{score:g}" if traits.metric_format == "%g" else f"{score:.5f}"
        return f"{TAB}{data}-{metric}:{value}"

    parts: list[str] = []
    if traits.legacy_monitor:
        for own in (False, True):
            for data, metrics in evals_log.items():
                parts += [fmt(data, m, log) for m, log in metrics.items() if (m in custom) == own]
    else:
        for data, metrics in evals_log.items():
            parts += [fmt(data, m, log) for m, log in metrics.items()]
    return f"[{epoch}]" + "".join(parts)


class MetricLines(xgb.callback.TrainingCallback):
    """Prints each round's evaluation line (xgboost's EvaluationMonitor, period 1)."""

    def __init__(self, traits: VersionTraits, custom: Sequence[str], out: TextIO | None = None) -> None:
        super().__init__()
        self.traits, self.custom = traits, tuple(custom)
        self.out = out

    def after_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
        if evals_log:
            print(format_line(epoch, evals_log, self.traits, self.custom), file=self.out or sys.stdout, flush=True)
        return False
