"""SageMaker's built-in algorithms, run locally (no user script: the image URI says which).

- `sdlocal.hook.algorithms.xgboost_image`: is a TrainingImage SageMaker's XGBoost algorithm, which version;
- `sdlocal.hook.algorithms.xgboost_request`: validate an algorithm request (hyperparameters, channels) as
  the container does, raising one `UserError` naming the culprit (CreateTrainingJob calls it too);
- `python -m sdlocal.hook.algorithms.xgboost --version 1.7-1`: the algorithm itself, in the job's `/opt/ml`
  (hook.algorithms.xgboost_train), with its built-in Debugger hook (hook.xgboost).
"""
