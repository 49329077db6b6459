"""`python -m sdlocal.hook.algorithms.xgboost` run for real in a subprocess over a job folder laid out by
the launcher's own functions (tests/algorithms/_job.py): regression on csv with a validation
channel (the xgboost_builtin_rules notebook's setup), binary classification on libsvm, multiclass
on parquet; the metric lines read with the algorithm's metric regexes; the model file loaded as the
docs say; every bad request or bad data a one-line failure."""
from __future__ import annotations

import json
import pickle
import re
from pathlib import Path

import numpy as np
import pytest
import xgboost as xgb

from sdlocal.hook.algorithms.xgboost_metrics import metric_definitions
from sdlocal.hook.algorithms.xgboost_versions import VERSIONS
from sdlocal.launcher.jobdir.folder import JobDir
from tests.algorithms._job import abalone, channel, run_algorithm, write_csv, write_libsvm, write_parquet

# The XGBoost container's metric regex (data, not code): aws/sagemaker-xgboost-container, branch
# 1.7-1, src/sagemaker_xgboost_container/algorithm_mode/metrics.py lines 27 and 36, for a metric
# that ends its line (its `\S+` takes what follows otherwise).
CONTAINER_REGEX = ".*\\[[0-9]+\\].*#011validation-{}:(\\S+)"
NOTEBOOK_HPS = {"max_depth": "5", "eta": "0.2", "gamma": "4", "min_child_weight": "6", "subsample": "0.7",
                "objective": "reg:squarederror", "num_round": "51"}


def _metric_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if re.match(r"^\[\d+\]#011", line)]


def _abalone_csv(tmp: Path, n: int = 1200, **kw: bool) -> tuple[Path, Path, np.ndarray, np.ndarray]:
    x, y = abalone(n)
    cut = n * 4 // 5
    write_csv(tmp / "data" / "train" / "part-0.csv", x[:cut // 2], y[:cut // 2], **kw)  # a folder of several files
    write_csv(tmp / "data" / "train" / "more" / "part-1.csv", x[cut // 2:cut], y[cut // 2:cut], **kw)
    write_csv(tmp / "data" / "validation" / "abalone.csv", x[cut:], y[cut:], **kw)
    return tmp / "data" / "train", tmp / "data" / "validation", x[cut:], y[cut:]


@pytest.mark.slow
def test_regression_on_csv_with_validation(tmp_path: Path) -> None:
    train, validation, xv, yv = _abalone_csv(tmp_path)
    run = run_algorithm(tmp_path, NOTEBOOK_HPS, [channel("train", train, "text/csv"),
                                                 channel("validation", validation, "text/csv; label_size=1")])
    assert run.returncode == 0, run.stderr
    lines = _metric_lines(run.stdout)
    assert len(lines) == 51 and lines[0].startswith("[0]#011train-rmse:") and lines[-1].startswith("[50]#011")
    assert all(re.fullmatch(r"\[\d+\]#011train-rmse:\d+\.\d{5}#011validation-rmse:\d+\.\d{5}", line) for line in lines)
    container = re.compile(CONTAINER_REGEX.format("rmse"))
    values = [float(container.match(line).group(1)) for line in lines]  # type: ignore[union-attr]
    ours = {d["Name"]: re.compile(d["Regex"]) for d in metric_definitions(VERSIONS["1.7-1"])}
    assert [float(ours["validation:rmse"].match(line).group(1)) for line in lines] == values  # type: ignore[union-attr]
    train_rmse = [float(ours["train:rmse"].match(line).group(1)) for line in lines]  # type: ignore[union-attr]
    assert values[-1] < values[0] / 3 and train_rmse[-1] < train_rmse[0] / 3
    # the model, as the docs load it (1.3-1 and later: Booster.load_model), predicts what was printed
    booster = xgb.Booster()
    booster.load_model(str(run.model))
    pred = booster.predict(xgb.DMatrix(xv))
    assert np.sqrt(np.mean((pred - yv) ** 2)) == pytest.approx(values[-1], abs=1e-4)
    assert not run.failure and "UserError" not in run.stderr


@pytest.mark.slow
def test_binary_classification_on_libsvm_pickled_model(tmp_path: Path) -> None:
    x, rings = abalone(1000, seed=1)
    y = (rings > 10).astype(float)
    write_libsvm(tmp_path / "data" / "train" / "abalone.train", x[:800], y[:800])
    write_libsvm(tmp_path / "data" / "validation" / "abalone.validation", x[800:], y[800:])
    hps = {"num_round": "20", "objective": "binary:logistic", "eval_metric": "logloss,auc,accuracy", "max_depth": "3",
           "early_stopping_rounds": "5"}
    run = run_algorithm(tmp_path, hps, [channel("train", tmp_path / "data" / "train", "libsvm"),
                                        channel("validation", tmp_path / "data" / "validation", "text/x-libsvm")],
                        version="1.2-2")
    assert run.returncode == 0, run.stderr
    lines = _metric_lines(run.stdout)
    # 1.2-2: xgboost's metrics of both data sets first, then the container's own (accuracy)
    assert re.fullmatch(r"\[0\]#011train-logloss:[\d.]+#011train-auc:[\d.]+#011validation-logloss:[\d.]+"
                        r"#011validation-auc:[\d.]+#011train-accuracy:[\d.]+#011validation-accuracy:[\d.]+", lines[0])
    accuracy = float(re.search(r"validation-accuracy:([\d.]+)$", lines[-1]).group(1))  # type: ignore[union-attr]
    with run.model.open("rb") as f:  # up to 1.2-2 the model file is the pickled Booster
        booster = pickle.load(f)
    assert isinstance(booster, xgb.Booster)
    margins = booster.predict(xgb.DMatrix(x[800:]), output_margin=True)
    assert np.mean((margins > 0) == y[800:]) == pytest.approx(accuracy, abs=1e-5) and accuracy > 0.7


@pytest.mark.slow
def test_multiclass_on_parquet(tmp_path: Path) -> None:
    x, rings = abalone(900, seed=2)
    y = np.digitize(rings, [8, 11]).astype(float)  # young, adult, old
    write_parquet(tmp_path / "data" / "train" / "a.parquet", x[:400], y[:400])
    write_parquet(tmp_path / "data" / "train" / "b.parquet", x[400:700], y[400:700])
    write_parquet(tmp_path / "data" / "validation" / "v.parquet", x[700:], y[700:])
    hps = {"num_round": "8", "objective": "multi:softprob", "num_class": "3", "eval_metric": "mlogloss,merror"}
    run = run_algorithm(tmp_path, hps, [channel("train", tmp_path / "data" / "train", "application/x-parquet"),
                                        channel("validation", tmp_path / "data" / "validation", "parquet")])
    assert run.returncode == 0, run.stderr
    lines = _metric_lines(run.stdout)
    assert len(lines) == 8 and "#011validation-merror:" in lines[-1] and "#011train-mlogloss:" in lines[0]
    booster = xgb.Booster()
    booster.load_model(str(run.model))
    prob = booster.predict(xgb.DMatrix(x[700:]))
    assert prob.shape == (200, 3)
    merror = float(re.search(r"validation-merror:([\d.]+)", lines[-1]).group(1))  # type: ignore[union-attr]
    assert np.mean(prob.argmax(axis=1) != y[700:]) == pytest.approx(merror, abs=1e-5)


def _train_only(tmp: Path, content_type: str | None = "text/csv", header: bool = False) -> list[dict]:
    x, y = abalone(100)
    write_csv(tmp / "data" / "train" / "t.csv", x, y, header=header)
    return [channel("train", tmp / "data" / "train", content_type)]


@pytest.mark.parametrize(("case", "hps", "expected"), [
    ("missing num_round", {"objective": "reg:squarederror"}, "UserError: Missing required hyperparameter: num_round"),
    ("bad objective", {"num_round": "5", "objective": "reg:linearish"},
     "UserError: Hyperparameter objective: reg:linearish is not in ["),
    ("eta out of range", {"num_round": "5", "eta": "3"}, "UserError: Hyperparameter eta: 3.0 is not in [0, 1]"),
    ("unknown hyperparameter", {"num_round": "5", "epochs": "3"}, "UserError: Extraneous hyperparameter found: epochs"),
    ("recordio content type", {"num_round": "5"}, "UserError: Channel train: ContentType "
     "application/x-recordio-protobuf is not read by sdlocal's XGBoost algorithm"),
    ("pipe mode", {"num_round": "5"}, "UserError: Channel train: TrainingInputMode Pipe is not supported"),
    ("missing train channel", {"num_round": "5"}, "UserError: Missing required channel: train"),
    ("header row", {"num_round": "5"}, "UserError: CSV file t.csv, line 1: 'rings' is a header row"),
    ("empty train channel", {"num_round": "5"}, "UserError: No data in training channel path"),
    ("labels out of range", {"num_round": "5", "objective": "binary:logistic"},
     # xgboost 1.x said "label must be in [0,1] for logistic regression"; xgboost 3 estimates base_score first
     "UserError: Check failed: is_valid: base_score must be in (0,1) for the logistic loss."),
])
def test_bad_requests_fail_with_one_line(tmp_path: Path, case: str, hps: dict[str, str], expected: str) -> None:
    channels = _train_only(tmp_path, header=case == "header row")
    edit = None
    if case == "recordio content type":
        channels = _train_only(tmp_path, "application/x-recordio-protobuf")
    elif case == "pipe mode":  # the launcher refuses Pipe already (launcher/spec/inputs.py); the runner says it too
        def edit(job: JobDir) -> None:
            path = job.config_file("inputdataconfig")
            config = json.loads(path.read_text())
            config["train"]["TrainingInputMode"] = "Pipe"
            path.write_text(json.dumps(config))
    elif case == "missing train channel":
        channels[0]["ChannelName"] = "validation"
    elif case == "empty train channel":
        (tmp_path / "data" / "train" / "t.csv").unlink()
    run = run_algorithm(tmp_path, hps, channels, edit=edit)
    assert run.returncode == 1, run.stdout
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith(expected), run.stderr
    assert run.failure == last + "\n"  # the failure file: the same one line
    assert not run.model.exists()


def test_a_version_without_the_debugger_hook_says_so(tmp_path: Path) -> None:
    channels = _train_only(tmp_path)
    run = run_algorithm(tmp_path, {"num_round": "2"}, channels, version="0.90-1",
                        debug_hook={"CollectionConfigurations": [{"CollectionName": "metrics"}]})
    assert run.returncode == 0, run.stderr
    assert "This XGBoost version has no Debugger hook" in run.stdout
    assert not any(run.job.tensors.iterdir())
    assert re.match(r"\[1\]#011train-rmse:\d+\.?\d*$", _metric_lines(run.stdout)[-1])  # 0.90's %g format


def test_early_stopping_keeps_the_best_model_and_save_each_round(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from sdlocal.hook.algorithms.xgboost_train import train_job

    rng = np.random.default_rng(5)
    x = rng.random((400, 5))
    y = (rng.random(400) < 0.5).astype(float)  # noise: validation logloss turns up after a few rounds
    dtrain, dval = xgb.DMatrix(x[:300], label=y[:300]), xgb.DMatrix(x[300:], label=y[300:])
    cfg = {"num_round": 60, "objective": "binary:logistic", "eval_metric": ["logloss"], "max_depth": 6,
           "early_stopping_rounds": 3, "save_model_on_termination": "true"}
    booster = train_job(VERSIONS["1.7-1"], cfg, dtrain, dval, tmp_path / "model")
    lines = _metric_lines(capsys.readouterr().out)
    assert 4 <= len(lines) < 60  # stopped early
    logloss = [float(re.search(r"validation-logloss:([\d.]+)", line).group(1)) for line in lines]  # type: ignore[union-attr]
    best = int(np.argmin(logloss))
    assert best == len(lines) - 4 and booster.num_boosted_rounds() == best + 1  # save_best=True, as 1.3-1+
    saved = xgb.Booster()
    saved.load_model(str(tmp_path / "model" / "xgboost-model"))
    assert saved.num_boosted_rounds() == best + 1
    # 1.2-2: xgboost's own early stopping keeps every round
    booster = train_job(VERSIONS["1.2-2"], cfg, dtrain, dval, tmp_path / "old")
    assert booster.num_boosted_rounds() == len(_metric_lines(capsys.readouterr().out))

    class Stopped(Exception):
        pass

    class StopAtRound2(xgb.callback.TrainingCallback):  # in the hook's place: runs after the model was saved
        def after_iteration(self, model: xgb.Booster, epoch: int, evals_log: dict) -> bool:
            if epoch == 2:
                raise Stopped
            return False

    with pytest.raises(Stopped):  # the job stopped during round 2: the model of rounds 0-2 is there
        train_job(VERSIONS["1.7-1"], cfg, dtrain, dval, tmp_path / "stopped", StopAtRound2())
    saved.load_model(str(tmp_path / "stopped" / "xgboost-model"))
    assert saved.num_boosted_rounds() == 3
