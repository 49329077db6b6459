"""A framework-mode XGBoost script as the SageMaker Debugger notebooks write it: smdebug's hook
created by the script with `out_dir="/opt/ml/output/tensors"` (the container's tensors folder),
TensorBoard files to `/opt/ml/output/tensorboard`, passed to xgboost.train as a callback."""
import argparse

import numpy as np
import xgboost as xgb
from smdebug import SaveConfig
from smdebug.xgboost import Hook


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--max_depth", type=int, default=8)
    parser.add_argument("--eta", type=float, default=0.3)
    parser.add_argument("--num_round", type=int, default=30)
    parser.add_argument("--smdebug_frequency", type=int, default=2)
    parser.add_argument("--smdebug_collections", type=str, default="metrics,trees,feature_importance")
    parser.add_argument("--output_uri", type=str, default="/opt/ml/output/tensors")
    parser.add_argument("--tensorboard_dir", type=str, default="/opt/ml/output/tensorboard")
    return parser.parse_args()


def create_smdebug_hook(out_dir, train_data=None, validation_data=None, frequency=1, collections=None,
                        tensorboard_dir=None):
    save_config = SaveConfig(save_interval=frequency)
    return Hook(out_dir=out_dir, train_data=train_data, validation_data=validation_data, save_config=save_config,
                include_collections=collections, export_tensorboard=True, tensorboard_dir=tensorboard_dir)


def main():
    args = parse_args()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2000, 8))
    y = ((x[:, 0] + 0.5 * x[:, 1] + rng.normal(scale=1.0, size=2000)) > 0).astype(float)  # noisy: deep trees
    dtrain, dval = xgb.DMatrix(x[:1400], label=y[:1400]), xgb.DMatrix(x[1400:], label=y[1400:])
    hook = create_smdebug_hook(args.output_uri, dtrain, dval, args.smdebug_frequency,
                               args.smdebug_collections.split(","), args.tensorboard_dir)
    params = {"max_depth": args.max_depth, "eta": args.eta, "objective": "binary:logistic", "eval_metric": "logloss"}
    xgb.train(params, dtrain, args.num_round, evals=[(dtrain, "train"), (dval, "validation")], callbacks=[hook],
              verbose_eval=5)


if __name__ == "__main__":
    main()
