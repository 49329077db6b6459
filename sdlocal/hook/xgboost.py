"""The XGBoost hook: a training callback (`xgboost.train(..., callbacks=[hook])`) that saves
smdebug's XGBoost collections in the trial format.

Tensors (one global step per boosting round, mode GLOBAL, as smdebug's XGBoost hook):
- `hyperparameters/<name>`: the given hyperparameters (numeric ones; text values are skipped);
- `<data set>-<metric>` (`train-rmse`, `validation-logloss`): the round's evaluation metrics
  (collections `metrics`, and `losses` for every metric but auc/map/aucpr);
- `predictions` / `labels`: the model's predictions on `validation_data` and its labels;
- `feature_importance/<type>/<feature>` for weight, gain, cover, total_gain, total_cover, each
  type normalized to sum to 1;
- `average_shap/<feature>`: mean SHAP value of each feature over `train_data`; `full_shap/<feature>`:
  the whole SHAP matrix, rows x (features + bias) (`predict(train_data, pred_contribs=True)`), under
  every feature's name, as smdebug 1.0 saves it (notebooks slice it: `shap_values[:, :-1]`);
- `trees/<column>` for the trees built in the round: Tree, Node, Depth, Feature (index, -1 for a
  leaf), Split, Yes, No, Missing (node ids, -1 for a leaf), Gain, Cover, Leaf. Numbers only: the
  trial format here has no text tensors (smdebug wrote feature names and `<tree>-<node>` ids).

Steps: the round number (`epoch`); a second `xgboost.train` with the same hook continues after the
last step (smdebug restarted at 0 and overwrote). The collections file is written when training
ends, the end marker at `close()` (atexit, or `python -m sdlocal.hook.run` when the script ends).
"""
from __future__ import annotations

import atexit
import json
import logging
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import xgboost as xgb

from sdlocal.hook import _current, _tensorboard
from sdlocal.hook._job_paths import job_path
from sdlocal.hook._tensorboard import TensorBoardWriter
from sdlocal.hook.config import HookConfig
from sdlocal.hook.errors import HookConfigError, HookError
from sdlocal.hook.step_record import write_record
from sdlocal.trial.collection import Collection
from sdlocal.trial.modes import ModeKeys
from sdlocal.trial.writer import TrialWriter

logger = logging.getLogger(__name__)

IMPORTANCE_TYPES = ("weight", "gain", "cover", "total_gain", "total_cover")
TREE_COLUMNS = ("Tree", "Node", "Depth", "Feature", "Split", "Yes", "No", "Missing", "Gain", "Cover", "Leaf")


def load_data(data: Any, what: str) -> xgb.DMatrix | None:
    """A DMatrix, or smdebug's `(file path, content type)` with content type csv (label in the
    first column, as SageMaker's XGBoost) or libsvm."""
    if data is None or isinstance(data, xgb.DMatrix):
        return data
    if not (isinstance(data, tuple) and len(data) == 2 and all(isinstance(x, str) for x in data)):
        raise HookConfigError(what, "expected an xgboost.DMatrix or a (file path, content type) tuple, "
                              f"got {type(data).__name__}")
    path, content_type = os.path.expanduser(data[0]), data[1].strip().lower()
    if not os.path.isfile(path):
        raise HookConfigError(what, f"no such file: {path}")
    try:
        if content_type in ("csv", "text/csv"):
            table = np.loadtxt(path, delimiter=",", ndmin=2)
            return xgb.DMatrix(table[:, 1:], label=table[:, 0])
        if content_type in ("libsvm", "text/libsvm", "text/x-libsvm"):
            return _read_libsvm(path)
    except ValueError as e:
        raise HookConfigError(what, f"cannot read {path} as {content_type}: {e}") from None
    raise HookConfigError(what, f"content type {data[1]!r} is not csv or libsvm")


def _read_libsvm(path: str) -> xgb.DMatrix:
    """`<label>[:weight] <index>:<value> ...` lines (xgboost 3.1 deprecated reading text files)."""
    import scipy.sparse

    labels: list[float] = []
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    with open(path) as f:
        for line in f:
            parts = line.split("#", 1)[0].split()
            if not parts:
                continue
            labels.append(float(parts[0].split(":")[0]))
            for item in parts[1:]:
                index, value = item.split(":")
                rows.append(len(labels) - 1)
                cols.append(int(index))
                vals.append(float(value))
    width = max(cols) + 1 if cols else 0
    matrix = scipy.sparse.csr_matrix((vals, (rows, cols)), shape=(len(labels), width))
    return xgb.DMatrix(matrix, label=np.array(labels))


def feature_names(model: xgb.Booster) -> list[str]:
    names = model.feature_names
    return list(names) if names is not None else [f"f{i}" for i in range(model.num_features())]


def tree_columns(model: xgb.Booster, first: int, last: int, names: list[str]) -> dict[str, np.ndarray]:
    """The nodes of trees `first` ≤ t < `last` as numeric columns (TREE_COLUMNS)."""
    index = {n: i for i, n in enumerate(names)}
    rows: list[tuple[float, ...]] = []

    def walk(tree: int, node: Mapping[str, Any], depth: int) -> None:
        leaf = "leaf" in node
        feature = -1.0 if leaf else float(index.get(str(node.get("split")), -1))
        rows.append((tree, node["nodeid"], depth, feature,
                     np.nan if leaf else float(node.get("split_condition", np.nan)),
                     -1 if leaf else node["yes"], -1 if leaf else node["no"],
                     -1 if leaf else node.get("missing", -1),
                     np.nan if leaf else float(node.get("gain", np.nan)), float(node.get("cover", np.nan)),
                     float(node["leaf"]) if leaf else np.nan))
        for child in node.get("children", ()):
            walk(tree, child, depth + 1)

    dump = model.get_dump(with_stats=True, dump_format="json")
    for t in range(first, min(last, len(dump))):
        walk(t, json.loads(dump[t]), 0)
    table = np.array(rows, dtype=np.float64).reshape(-1, len(TREE_COLUMNS))
    return {col: table[:, i] for i, col in enumerate(TREE_COLUMNS)}


def _numeric(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


class Hook(xgb.callback.TrainingCallback):
    """sdlocal's XGBoost hook (smdebug.xgboost.Hook is this with smdebug's constructor)."""

    def __init__(self, config: HookConfig | None = None, *, out_dir: str | Path | None = None,
                 hyperparameters: Mapping[str, Any] | None = None, train_data: Any = None,
                 validation_data: Any = None, tensorboard_dir: str | Path | None = None,
                 dry_run: bool = False, auto: bool = False) -> None:
        super().__init__()
        self.config = config if config is not None else HookConfig.from_dict({}, framework="xgboost")
        # a SageMaker container path (/opt/ml/...) is the job's folder (hook._job_paths)
        self.out_dir = Path(job_path(out_dir if out_dir is not None else self.config.local_path))
        self.hyperparameters = dict(hyperparameters) if hyperparameters else None
        self.train_data = train_data
        self.validation_data = validation_data
        self.tensorboard_dir = job_path(tensorboard_dir) if tensorboard_dir is not None else None
        self.dry_run = dry_run
        self.auto = auto
        self.step = -1
        self.mode = ModeKeys.GLOBAL
        self.last_saved_step: int | None = None
        self.handed_over = False
        self._offset = 0  # steps of earlier xgboost.train calls with this hook
        self._names: dict[str, set[str]] = {c.name: set() for c in self.config.collections}
        self._writer: TrialWriter | None = None
        self._tb: TensorBoardWriter | None = None
        self._write_enabled = not dry_run
        self._warned: set[str] = set()
        self._closed = False
        self._scheduled: dict[str, int] = {}  # steps per collection its schedule had it saved (.sdlocal-steps.json)
        atexit.register(self._close_at_exit)
        _current.install(self)

    @classmethod
    def create_from_json_file(cls, path: str | Path | None = None) -> Hook:
        config = HookConfig.from_json_file(path, framework="xgboost")
        return cls(config, tensorboard_dir=_tensorboard.job_dir(config.tensorboard_dir))

    @property
    def closed(self) -> bool:
        return self._closed

    # ------------------------------------------------------------------ xgboost callbacks
    def before_training(self, model: xgb.Booster) -> xgb.Booster:
        if self.last_saved_step is not None or self.step >= 0:
            self._offset = self.step + 1
        return model

    def after_iteration(self, model: xgb.Booster, epoch: int, evals_log: Mapping[str, Any]) -> bool:
        if self._closed:
            return False
        self.step = self._offset + epoch
        active = [c for c in self.config.collections_to_save() if c.should_save(ModeKeys.GLOBAL, self.step)]
        for c in active:
            self._scheduled[c.name] = self._scheduled.get(c.name, 0) + 1
        if not active:
            return False
        wanted = {c.name for c in active}
        tensors = dict(self._tensors(model, epoch, evals_log, wanted, active))
        self._write(tensors, active)
        return False

    def after_training(self, model: xgb.Booster) -> xgb.Booster:
        self._write_collections()
        return model

    # ------------------------------------------------------------------ what is saved
    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            logger.warning("sdlocal XGBoost hook: %s", message)

    def _tensors(self, model: xgb.Booster, epoch: int, evals_log: Mapping[str, Any], wanted: set[str],
                 active: list[Any]) -> Iterator[tuple[str, Any]]:
        every = "all" in wanted
        if every or wanted & {"metrics", "losses", "default"}:
            for data_name, metrics in evals_log.items():
                for metric, values in metrics.items():
                    last = values[-1]
                    yield f"{data_name}-{metric}", np.float64(last[0] if isinstance(last, tuple) else last)
        if every or wanted & {"hyperparameters", "default"}:
            if not self.hyperparameters:
                self._warn_once("hp", "no hyperparameters to save: pass hyperparameters= (or set hook.hyperparameters)")
            for name, value in (self.hyperparameters or {}).items():
                number = _numeric(value)
                if number is not None:
                    yield f"hyperparameters/{name}", np.float64(number)
        validation = load_data(self.validation_data, "validation_data")
        self.validation_data = validation
        if every or wanted & {"predictions", "labels", "default"}:
            if validation is None:
                self._warn_once("val", "no predictions or labels: pass validation_data= (or set hook.validation_data)")
            else:
                yield "predictions", np.asarray(model.predict(validation))
                yield "labels", np.asarray(validation.get_label())
        names = feature_names(model)
        if every or wanted & {"feature_importance", "default"}:
            for kind in IMPORTANCE_TYPES:
                scores = model.get_score(importance_type=kind)
                # multi-output models give a list per feature: their sum
                totals = {f: float(np.sum(v)) for f, v in scores.items()}
                total = sum(totals.values())
                for feature, score in totals.items():
                    if total > 0:
                        yield f"feature_importance/{kind}/{feature}", np.float64(score / total)
        if every or wanted & {"average_shap", "full_shap", "default"}:
            train = load_data(self.train_data, "train_data")
            self.train_data = train
            if train is None:
                self._warn_once("shap", "no SHAP values: pass train_data= (or set hook.train_data)")
            else:
                shap = np.asarray(model.predict(train, pred_contribs=True))
                for i, feature in enumerate([*names, "bias"]):
                    yield f"full_shap/{feature}", shap  # the whole matrix under each name, as smdebug 1.0
                    yield f"average_shap/{feature}", np.float64(np.mean(shap[..., i]))
        if every or wanted & {"trees", "default"}:
            per_round = max(1, model.num_boosted_rounds() and len(model.get_dump()) // model.num_boosted_rounds())
            for col, values in tree_columns(model, epoch * per_round, (epoch + 1) * per_round, names).items():
                yield f"trees/{col}", values

    def _write(self, tensors: Mapping[str, Any], active: list[Any]) -> None:
        chosen: list[tuple[str, Any]] = []
        for name, value in tensors.items():
            colls = [c for c in active if c.matches(name)]
            if not colls:
                continue
            chosen.append((name, value))
            for c in colls:
                self._names.setdefault(c.name, set()).add(name)
        if not chosen or not self._ensure_writer():
            return
        assert self._writer is not None
        try:
            self._writer.write_step(self.step, ModeKeys.GLOBAL, self.step, chosen)
        except OSError as e:
            raise HookError(f"cannot write step {self.step} to {self.out_dir}: {e}") from e
        self.last_saved_step = self.step
        if self._tb is not None:
            for name, value in chosen:
                arr = np.asarray(value)
                if arr.size == 1 and not name.startswith(("trees/", "full_shap/")):
                    self._tb.add_scalar(name, float(arr.reshape(())), self.step)
                elif name == "predictions":
                    self._tb.add_histogram(name, arr, self.step)
            self._tb.flush()

    def _ensure_writer(self) -> bool:
        if self._writer is None:
            if self._write_enabled and not _current.claim(self.out_dir, self):
                self._write_enabled = False
                logger.warning("sdlocal hook: another hook of this process already writes to %s; this one "
                               "writes nothing (one hook writes per folder)", self.out_dir)
            rank = _rank()
            if rank != 0 and self.config.include_workers != "all":
                self._write_enabled = False
            self._writer = TrialWriter(self.out_dir, f"worker_{rank}")
            if self._write_enabled and self.tensorboard_dir is not None:
                self._tb = TensorBoardWriter(self.tensorboard_dir, f"worker_{rank}")
        return self._write_enabled

    def _write_collections(self) -> None:
        if self._writer is None or not self._write_enabled:
            return
        objs = [Collection.from_dict(c.to_dict(sorted(self._names.get(c.name, ())))) for c in self.config.collections]
        self._writer.write_collections(objs, _world() if self.config.include_workers == "all" else 1)

    # ------------------------------------------------------------------ closing
    def _hand_over_to(self, new: Any) -> None:
        """A hook the script makes later takes over: this one stops writing (the zero-code hook
        is only added to a `xgboost.train` call without one, so nothing is lost)."""
        self.handed_over = True
        self.close()

    def close(self) -> None:
        """Write the collections file and the end marker (once)."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self._close_at_exit)
        try:
            if self._writer is not None and self._write_enabled:
                self._write_collections()
                if not self.handed_over:
                    self._writer.write_end_marker()
                    scheduled = {c.name: self._scheduled.get(c.name, 0) for c in self.config.collections_to_save()}
                    write_record(self.out_dir, self.step + 1, {}, scheduled)
        except OSError as e:
            raise HookError(f"cannot finish the trial in {self.out_dir}: {e}") from e
        finally:
            if self._tb is not None:
                self._tb.close()
            _current.release(self.out_dir, self)

    def _close_at_exit(self) -> None:
        try:
            self.close()
        except HookError as e:
            logger.error("sdlocal hook: %s", e)


def _rank() -> int:
    try:
        return int(xgb.collective.get_rank())
    except Exception:  # noqa: BLE001 - no communicator: a single worker
        return 0


def _world() -> int:
    try:
        return max(1, int(xgb.collective.get_world_size()))
    except Exception:  # noqa: BLE001
        return 1
