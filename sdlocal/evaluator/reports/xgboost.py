"""CreateXgboostReport's `xgboost_report.html`: what an XGBoost training's trial shows.

    data = XgboostReportInput.from_trial(trial, job_name="my-job")
    write_xgboost_report(rule_output_storage, data)        # -> "xgboost_report.html"

Sections (each only with its data; a sentence says what is missing and how to save it):
headline cards; the metric curves, train and validation of one metric on one chart; the feature
importance (gain and weight) at the last saved step; the SHAP values (mean |SHAP| from full_shap,
else average_shap); for classification the confusion matrix and a classification report (precision,
recall, F1, support per class); the distributions of labels and predictions; for regression the
residuals (against the prediction, and their distribution); the hyperparameters.

Classification or regression is read from the data: labels that are small non-negative integers
(at most MAX_CLASSES values) with predictions that are probabilities (binary), a score per class, or
class ids. Anything else is regression.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sdlocal.evaluator.reports import _plots as plots
from sdlocal.evaluator.reports._page import Page, Section, cards, join, key_values, note, paragraph, table
from sdlocal.trial.storage import Storage

XGBOOST_REPORT_KEY = "xgboost_report.html"
MAX_CLASSES = 50
TOP_FEATURES = 20
_METRIC = re.compile(r"^([A-Za-z_]+)-(.+)$")


@dataclass(frozen=True)
class Series:
    name: str
    steps: tuple[int, ...]
    values: tuple[float, ...]


@dataclass(frozen=True)
class XgboostReportInput:
    job_name: str
    steps: tuple[int, ...] = ()
    metrics: tuple[Series, ...] = ()
    importance: Mapping[str, Mapping[str, float]] = field(default_factory=dict)  # type -> feature -> share
    importance_step: int | None = None
    shap: Mapping[str, float] = field(default_factory=dict)  # feature -> mean |SHAP| (or mean SHAP)
    shap_kind: str = ""  # "full" (mean |SHAP|) or "average" (mean SHAP)
    labels: np.ndarray | None = None
    predictions: np.ndarray | None = None
    prediction_step: int | None = None
    hyperparameters: Mapping[str, float] = field(default_factory=dict)
    ended: bool = False

    @classmethod
    def from_trial(cls, trial: Any, job_name: str = "") -> XgboostReportInput:
        steps = tuple(trial.steps())
        names = trial.tensor_names()

        def last(name: str) -> tuple[int, np.ndarray] | None:
            for step in reversed(trial.tensor(name).steps()):
                try:
                    return step, np.asarray(trial.tensor(name).value(step))
                except Exception:  # noqa: BLE001 - a value that cannot be read: an older step
                    continue
            return None

        metrics = []
        for name in sorted(n for n in names if _METRIC.match(n) and "/" not in n):
            tensor = trial.tensor(name)
            s = tuple(tensor.steps())
            metrics.append(Series(name, s, tuple(float(np.asarray(tensor.value(x)).reshape(-1)[0]) for x in s)))
        importance: dict[str, dict[str, float]] = {}
        imp_step = None
        for name in names:
            m = re.match(r"^feature_importance/([^/]+)/(.+)$", name)
            if m:
                got = last(name)
                if got is not None:
                    imp_step = got[0] if imp_step is None else max(imp_step, got[0])
        for name in names:
            m = re.match(r"^feature_importance/([^/]+)/(.+)$", name)
            if m and imp_step is not None and imp_step in trial.tensor(name).steps():
                importance.setdefault(m.group(1), {})[m.group(2)] = float(trial.tensor(name).value(imp_step))
        full = [n for n in names if n.startswith("full_shap/") and not n.endswith("/bias")]
        avg = [n for n in names if n.startswith("average_shap/") and not n.endswith("/bias")]
        averages: dict[str, float] = {}
        for name in avg:
            got = last(name)
            if got is not None:
                averages[name.split("/", 1)[1]] = float(got[1].reshape(-1)[0])
        shap: dict[str, float] = {}
        for name in full:
            got = last(name)
            column = None if got is None else shap_column(name.split("/", 1)[1], got[1], averages)
            if column is not None:
                shap[name.split("/", 1)[1]] = float(np.mean(np.abs(column)))
        kind = "full" if shap else ("average" if averages else "")
        if not shap:
            shap = averages
        labels = predictions = None
        pred_step = None
        if "predictions" in names and "labels" in names:
            common = sorted(set(trial.tensor("predictions").steps()) & set(trial.tensor("labels").steps()))
            if common:
                pred_step = common[-1]
                labels = np.asarray(trial.tensor("labels").value(pred_step))
                predictions = np.asarray(trial.tensor("predictions").value(pred_step))
        hyper = {}
        for name in names:
            if name.startswith("hyperparameters/"):
                got = last(name)
                if got is not None:
                    hyper[name.split("/", 1)[1]] = float(got[1].reshape(-1)[0])
        return cls(job_name=job_name, steps=steps, metrics=tuple(metrics), importance=importance,
                   importance_step=imp_step, shap=shap, shap_kind=kind, labels=labels, predictions=predictions,
                   prediction_step=pred_step, hyperparameters=hyper, ended=bool(trial.training_ended()))


# ---------------------------------------------------------------------------- the task


def task_of(labels: np.ndarray, predictions: np.ndarray) -> tuple[str, np.ndarray | None]:
    """("classification", predicted class ids) or ("regression", None)."""
    y = labels.astype(np.float64).ravel()
    p = predictions.astype(np.float64)
    finite = np.isfinite(y)
    if not finite.any():
        return "regression", None
    yv = y[finite]
    if not (np.all(yv == np.rint(yv)) and yv.min() >= 0 and yv.max() < MAX_CLASSES):
        return "regression", None
    if p.ndim == 2 and p.shape[0] == y.size and p.shape[1] > 1:
        return "classification", np.argmax(p, axis=1).astype(np.float64)
    flat = p.ravel()
    if flat.size != y.size:
        return "regression", None
    if yv.max() <= 1 and flat.min() >= 0 and flat.max() <= 1:
        return "classification", (flat >= 0.5).astype(np.float64)
    if np.all(flat == np.rint(flat)):
        return "classification", flat
    return "regression", None


def confusion(labels: np.ndarray, predicted: np.ndarray, classes: Sequence[int]) -> np.ndarray:
    index = {c: i for i, c in enumerate(classes)}
    m = np.zeros((len(classes), len(classes)), dtype=np.int64)
    for t, p in zip(labels.astype(np.int64), predicted.astype(np.int64), strict=True):
        if t in index and p in index:
            m[index[t], index[p]] += 1
    return m


def classification_rows(matrix: np.ndarray, classes: Sequence[int]) -> list[list[object]]:
    """Per class: precision, recall, F1, support; then accuracy and the macro averages."""
    rows: list[list[object]] = []
    precisions, recalls, f1s = [], [], []
    for i, c in enumerate(classes):
        tp = matrix[i, i]
        predicted, support = matrix[:, i].sum(), matrix[i, :].sum()
        precision = tp / predicted if predicted else 0.0
        recall = tp / support if support else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        precisions.append(precision)
        recalls.append(recall)
        f1s.append(f1)
        rows.append([str(c), f"{precision:.3f}", f"{recall:.3f}", f"{f1:.3f}", int(support)])
    total = int(matrix.sum())
    accuracy = float(np.trace(matrix)) / total if total else 0.0
    rows.append(["accuracy", "", "", f"{accuracy:.3f}", total])
    rows.append(["macro average", f"{np.mean(precisions):.3f}", f"{np.mean(recalls):.3f}", f"{np.mean(f1s):.3f}", total])
    return rows


# ---------------------------------------------------------------------------- the page


def _metric_section(data: XgboostReportInput) -> Section:
    lead = "Each evaluation metric per boosting round: the training set's and the validation set's on one chart."
    if not data.metrics:
        return Section("Metrics", note("No metric was saved: the job's hook config needs the `metrics` "
                                       "collection and xgboost.train needs `evals`.", "warn"), "metrics", lead)
    by_metric: dict[str, list[Series]] = {}
    for s in data.metrics:
        m = _METRIC.match(s.name)
        assert m is not None
        by_metric.setdefault(m.group(2), []).append(s)
    figures = []
    for metric, series in by_metric.items():
        lines = [plots.Line(np.array(s.steps), np.array(s.values), label=s.name.split("-", 1)[0],
                            kind="line" if len(s.steps) > 1 else "points") for s in series]
        figures.append(plots.line_chart(lines, title=metric, xlabel="boosting round", ylabel=metric))
    rows = [[s.name, s.steps[0], f"{s.values[0]:.5g}", s.steps[-1], f"{s.values[-1]:.5g}",
             f"{min(s.values):.5g}", f"{max(s.values):.5g}"] for s in data.metrics if s.steps]
    return Section("Metrics", join([*figures, table(["metric", "first round", "first", "last round", "last",
                                                     "min", "max"], rows)]), "metrics", lead)


def _importance_section(data: XgboostReportInput) -> Section:
    lead = "How much each feature serves the model at the last saved round, as a share of all features."
    if not data.importance:
        return Section("Feature importance", note("No feature importance was saved (collection "
                                                  "`feature_importance`).", "warn"), "importance", lead)
    parts = []
    for kind in ("gain", "weight", "cover"):
        scores = data.importance.get(kind)
        if scores:
            top = sorted(scores.items(), key=lambda kv: -kv[1])[:TOP_FEATURES]
            parts.append(plots.bar_chart([k for k, _ in top], [v for _, v in top], xlabel="share",
                                         title=f"Feature importance ({kind}) at round {data.importance_step}"))
    kinds = sorted(data.importance)
    features = sorted({f for scores in data.importance.values() for f in scores},
                      key=lambda f: -data.importance.get("gain", {}).get(f, 0.0))
    rows = [[f, *(f"{data.importance[k].get(f, 0.0):.4f}" for k in kinds)] for f in features[:TOP_FEATURES]]
    parts.append(table(["feature", *kinds], rows))
    return Section("Feature importance", join(parts), "importance", lead)


def shap_column(feature: str, value: np.ndarray, averages: Mapping[str, float]) -> np.ndarray | None:
    """A feature's SHAP values from its `full_shap/<feature>` tensor: smdebug 1.0 saves the whole
    rows x (features + bias) matrix under every name, older sdlocal trials the feature's column.
    The column of a matrix: XGBoost's own names (`f3`) say it; other names are found by their
    `average_shap` value (the column's mean); None when neither tells."""
    if value.ndim < 2:
        return value
    width = value.shape[-1]
    place = re.fullmatch(r"f(\d+)", feature)
    if place and int(place.group(1)) < width - 1:
        return value[..., int(place.group(1))]
    if feature not in averages:
        return None
    means = value.reshape(-1, width).mean(axis=0)[:-1]
    return value[..., int(np.argmin(np.abs(means - averages[feature])))]


def _shap_section(data: XgboostReportInput) -> Section:
    lead = "SHAP values: each feature's contribution to the model's output on the training data."
    if not data.shap:
        return Section("SHAP values", note("No SHAP values were saved: collections `full_shap` or `average_shap` "
                                           "and the hook's train_data.", "warn"), "shap", lead)
    top = sorted(data.shap.items(), key=lambda kv: -abs(kv[1]))[:TOP_FEATURES]
    what = "mean |SHAP value|" if data.shap_kind == "full" else "mean SHAP value"
    return Section("SHAP values", plots.bar_chart([k for k, _ in top], [v for _, v in top], xlabel=what,
                                                  title=f"{what} per feature"), "shap", lead)


def _prediction_sections(data: XgboostReportInput) -> list[Section]:
    if data.labels is None or data.predictions is None:
        return [Section("Predictions", note("No predictions and labels were saved: collections `predictions` "
                                            "and `labels` and the hook's validation_data.", "warn"),
                        "predictions")]
    labels, preds = data.labels, data.predictions
    task, predicted = task_of(labels, preds)
    y = labels.astype(np.float64).ravel()
    at = f"round {data.prediction_step}, {y.size} validation rows"
    sections: list[Section] = []
    if task == "classification" and predicted is not None:
        classes = sorted({int(v) for v in np.concatenate([y[np.isfinite(y)], predicted])})
        matrix = confusion(y, predicted, classes)
        names = [str(c) for c in classes]
        heat = plots.heatmap(matrix, title=f"Confusion matrix ({at})", row_labels=names, col_labels=names,
                             xlabel="predicted class", ylabel="true class", annotate=True, cmap="Blues",
                             colorbar_label="count", height_in=min(6.0, 1.4 + 0.45 * len(classes)))
        report = table(["class", "precision", "recall", "F1", "support"], classification_rows(matrix, classes))
        sections.append(Section("Confusion matrix", join([heat, report]), "confusion",
                                "Which classes the model predicts for each true class, and its precision and "
                                "recall per class."))
        dist = plots.histogram([("labels", y), ("predicted class", predicted)], title="Labels and predicted classes",
                               xlabel="class", bins=max(2, len(classes)))
        groups: list[tuple[str, Any]] = [("labels", y)]
        if preds.ndim == 1 or (preds.ndim == 2 and preds.shape[1] == 1):
            groups.append(("predicted probability", preds.ravel()))
        scores = plots.histogram(groups, title="Labels and predicted scores", xlabel="value", bins=40)
        sections.append(Section("Label and prediction distribution", join([dist, scores]), "distribution",
                                "How often each class occurs among the labels and among the predictions."))
    else:
        p = preds.astype(np.float64).ravel()
        if p.size != y.size:
            return [Section("Predictions", note(f"Predictions ({p.size} values) and labels ({y.size}) do not "
                                                "pair up.", "warn"), "predictions")]
        dist = plots.histogram([("labels", y), ("predictions", p)], title=f"Labels and predictions ({at})",
                               xlabel="value", bins=40)
        sections.append(Section("Label and prediction distribution", dist, "distribution",
                                "The distribution of the labels and of the model's predictions."))
        residual = y - p
        scatter = plots.line_chart([plots.Line(p, residual, label="residual", kind="points", size=2.0)],
                                   title="Residual against prediction", xlabel="prediction",
                                   ylabel="label − prediction", marks=[plots.Mark(0.0, "0")], legend=False)
        hist = plots.histogram([("residual", residual)], title="Residuals", xlabel="label − prediction", bins=40)
        rmse = float(np.sqrt(np.nanmean(residual ** 2)))
        mae = float(np.nanmean(np.abs(residual)))
        sections.append(Section("Residuals", join([key_values([("RMSE", f"{rmse:.5g}"), ("MAE", f"{mae:.5g}")]),
                                                   scatter, hist]), "residuals",
                                "Label minus prediction on the validation data: a pattern against the "
                                "prediction means the model misses structure."))
    return sections


def build_page(data: XgboostReportInput) -> Page:
    last_metrics = [(s.name, f"{s.values[-1]:.4g}") for s in data.metrics if s.values][:4]
    header = join([
        paragraph("Training has ended." if data.ended else "Training is still running: this report shows the "
                  "steps saved so far."),
        cards([("saved rounds", str(len(data.steps))),
               ("last round", str(data.steps[-1]) if data.steps else "—"), *last_metrics]),
    ])
    sections = [_metric_section(data), _importance_section(data), _shap_section(data), *_prediction_sections(data)]
    hyper = (table(["hyperparameter", "value"], [[k, f"{v:g}"] for k, v in sorted(data.hyperparameters.items())])
             if data.hyperparameters else note("No hyperparameters were saved (collection `hyperparameters`).",
                                               "info"))
    sections.append(Section("Hyperparameters", hyper, "hyperparameters", "The numeric hyperparameters the hook saved."))
    return Page(title=f"XGBoost training report: {data.job_name}" if data.job_name else "XGBoost training report",
                subtitle="SageMaker Debugger CreateXgboostReport, run locally by sdlocal",
                sections=sections, header=header, footer="Written by sdlocal's CreateXgboostReport",
                meta={"generator": "sdlocal CreateXgboostReport"})


def render_xgboost_report(data: XgboostReportInput) -> str:
    return build_page(data).render()


def write_xgboost_report(storage: Storage, data: XgboostReportInput, key: str = XGBOOST_REPORT_KEY) -> str:
    storage.write(key, render_xgboost_report(data).encode("utf-8"))
    return key


__all__ = ["XGBOOST_REPORT_KEY", "Series", "XgboostReportInput", "build_page", "classification_rows", "confusion",
           "render_xgboost_report", "task_of", "write_xgboost_report"]
