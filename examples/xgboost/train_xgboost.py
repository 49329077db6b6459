"""An XGBoost script-mode training as SageMaker users write it: hyperparameters as command-line
arguments, smdebug's hook created from the job's config and passed as a callback.

    sdlocal run examples/xgboost/job.yaml
    sdlocal run examples/xgboost/job.yaml -p max_depth=10 -p leak=1   # TreeDepth, FeatureImportanceOverweight

With `-p smdebug_hook=0` the script creates no hook and is hooked all the same (zero-code: sdlocal
adds the hook to xgboost.train and gives it the params, dtrain and the validation set).
"""
from __future__ import annotations

import argparse
import os

import numpy as np
import xgboost as xgb


def make_data(n: int, leak: bool, seed: int) -> tuple[xgb.DMatrix, xgb.DMatrix]:
    """10 features, a binary label from a linear score of the first 6 (a synthetic stand-in for a
    CSV channel; `leak` copies the label into feature 9, a target leak)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 10))
    y = (6.0 * x[:, :6] @ np.array([1.0, -0.9, 0.8, -0.7, 0.6, 0.5]) > 0).astype(np.float64)
    if leak:
        x[:, 9] = y + 0.01 * rng.normal(size=n)
    cut = int(n * 0.7)
    return xgb.DMatrix(x[:cut], label=y[:cut]), xgb.DMatrix(x[cut:], label=y[cut:])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--max_depth", type=int, default=3)
    p.add_argument("--eta", type=float, default=0.3)
    p.add_argument("--num_round", type=int, default=50)
    p.add_argument("--objective", default="binary:logistic")
    p.add_argument("--rows", type=int, default=3000)
    p.add_argument("--leak", type=int, default=0)
    p.add_argument("--smdebug_hook", type=int, default=1, help="0: create no hook (sdlocal attaches one)")
    args = p.parse_args()
    dtrain, dval = make_data(args.rows, bool(args.leak), seed=0)
    params = {"max_depth": args.max_depth, "eta": args.eta, "objective": args.objective, "eval_metric": "logloss"}
    callbacks = []
    if args.smdebug_hook:
        from smdebug.xgboost import Hook

        hook = Hook.create_from_json_file()
        hook.hyperparameters = params
        hook.train_data = dtrain  # SHAP values
        hook.validation_data = dval  # predictions and labels
        callbacks.append(hook)
    booster = xgb.train(params, dtrain, args.num_round, evals=[(dtrain, "train"), (dval, "validation")],
                        callbacks=callbacks, verbose_eval=10)
    model_dir = os.environ.get("SM_MODEL_DIR", "model")
    os.makedirs(model_dir, exist_ok=True)
    booster.save_model(os.path.join(model_dir, "xgboost-model.json"))


if __name__ == "__main__":
    main()
