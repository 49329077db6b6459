"""The XGBoost detection runs: real `xgboost.train` trainings through sdlocal's XGBoost hook.

Data: 10 standard-normal features, a binary label from a linear score of the first 6 (healthy: no
label noise, so a depth-3 model reaches about 94 % per class). Each fault changes one thing:
- leaked_feature: feature 9 is the label plus a little noise (a target leak): the model splits on
  it alone → FeatureImportanceOverweight;
- deep_trees: max_depth 10 with no regularization on noisy labels → TreeDepth;
- xgb_imbalance: the score shifted so that about 1 % of the labels are positive → ClassImbalance;
- xgb_overfit: 400 samples, 30 % flipped labels, depth 8, eta 0.5, no regularization: the
  validation logloss climbs from 0.79 to about 3 → Overfit.
The hook config is what `sdlocal run` writes for a job with every rule that reads XGBoost data
(their default collections merged), saved every round.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

FEATURES = 10
WEIGHTS = np.array([1.0, -0.9, 0.8, -0.7, 0.6, 0.5])
XGBOOST_RULES: tuple[str, ...] = (
    "FeatureImportanceOverweight", "TreeDepth", "ClassImbalance", "Confusion", "LossNotDecreasing", "Overfit",
    "Overtraining",
)
BASE_PARAMS: Mapping[str, Any] = {"objective": "binary:logistic", "eval_metric": "logloss", "max_depth": 3,
                                  "eta": 0.3, "seed": 0}


@dataclass(frozen=True)
class XgbSetup:
    """One XGBoost training: the data recipe, the booster parameters and the rounds."""

    seed: int = 0
    n: int = 3000
    rounds: int = 60
    params: Mapping[str, Any] = field(default_factory=dict)
    logistic_noise: bool = False  # label = score + logistic noise > 0 (else score > 0)
    flip: float = 0.0  # share of labels flipped
    shift: float = 0.0  # subtracted from the score: fewer positive labels
    leak: bool = False  # feature 9 = label + noise


def data(setup: XgbSetup) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(setup.seed)
    x = rng.normal(size=(setup.n, FEATURES))
    score = 6.0 * x[:, : len(WEIGHTS)] @ WEIGHTS - setup.shift
    if setup.logistic_noise:
        score = score + rng.logistic(size=setup.n)
    y = (score > 0).astype(np.float64)
    if setup.flip:
        flipped = rng.random(setup.n) < setup.flip
        y[flipped] = 1.0 - y[flipped]
    if setup.leak:
        x[:, 9] = y + 0.01 * rng.normal(size=setup.n)
    cut = int(setup.n * 0.7)
    return (x[:cut], y[:cut]), (x[cut:], y[cut:])


def healthy_xgb(seed: int = 20) -> XgbSetup:
    return XgbSetup(seed=seed)


def leaked_feature(seed: int = 21) -> XgbSetup:
    return XgbSetup(seed=seed, n=1500, rounds=40, logistic_noise=True, leak=True)


def deep_trees(seed: int = 22) -> XgbSetup:
    return XgbSetup(seed=seed, n=1500, rounds=40, logistic_noise=True, flip=0.2,
                    params={"max_depth": 10, "eta": 0.1, "min_child_weight": 0, "gamma": 0, "lambda": 0})


def xgb_imbalance(seed: int = 23) -> XgbSetup:
    return XgbSetup(seed=seed, n=1500, rounds=40, logistic_noise=True, shift=25.0)


def xgb_overfit(seed: int = 24) -> XgbSetup:
    return XgbSetup(seed=seed, n=400, logistic_noise=True, flip=0.3,
                    params={"max_depth": 8, "eta": 0.5, "min_child_weight": 0, "lambda": 0})


def hook_request(rules: tuple[str, ...] = XGBOOST_RULES) -> dict[str, Any]:
    from detection.hookconfig import hook_request as merged

    return merged(rules, user_collections=())


def train_xgb(setup: XgbSetup, trial_dir: Path, request: Mapping[str, Any] | None = None) -> dict[str, float]:
    """Train `setup` with the XGBoost hook (hyperparameters, SHAP data and validation data given as
    a script would); returns the first/last train logloss and the last validation logloss."""
    import xgboost as xgb

    from sdlocal.hook.config import HookConfig
    from sdlocal.hook.xgboost import Hook

    (x, y), (xv, yv) = data(setup)
    dtrain, dval = xgb.DMatrix(x, label=y), xgb.DMatrix(xv, label=yv)
    body = dict(request if request is not None else hook_request())
    body["LocalPath"] = str(trial_dir)
    params = {**BASE_PARAMS, **setup.params}
    hook = Hook(HookConfig.from_dict(body, framework="xgboost"), out_dir=trial_dir, hyperparameters=params,
                train_data=dtrain, validation_data=dval, tensorboard_dir=None)
    log: dict[str, Any] = {}
    try:
        xgb.train(params, dtrain, setup.rounds, evals=[(dtrain, "train"), (dval, "validation")], evals_result=log,
                  callbacks=[hook], verbose_eval=False)
    finally:
        hook.close()
    train, val = log["train"]["logloss"], log["validation"]["logloss"]
    return {"first_loss": float(train[0]), "last_loss": float(train[-1]), "val_loss": float(val[-1])}
