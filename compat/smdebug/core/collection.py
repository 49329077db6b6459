"""smdebug.core.collection: collection names (CollectionKeys) and smdebug's mutable Collection
(`include(regex)`, `add_tensor_name(name)`, `tensor_names`, `include_regex`): what
`sdlocal.trial.collection(name)` hands out (trial/mutable_collection.py)."""
from __future__ import annotations

from sdlocal.trial.mutable_collection import MutableCollection as Collection


class CollectionKeys:
    DEFAULT = "default"
    ALL = "all"
    INPUTS = "inputs"
    OUTPUTS = "outputs"
    WEIGHTS = "weights"
    GRADIENTS = "gradients"
    LOSSES = "losses"
    BIASES = "biases"
    LAYERS = "layers"
    SM_METRICS = "sm_metrics"
    OPTIMIZER_VARIABLES = "optimizer_variables"
    TENSORFLOW_SUMMARIES = "tensorflow_summaries"
    METRICS = "metrics"
    # XGBoost
    HYPERPARAMETERS = "hyperparameters"
    PREDICTIONS = "predictions"
    LABELS = "labels"
    FEATURE_IMPORTANCE = "feature_importance"
    AVERAGE_SHAP = "average_shap"
    FULL_SHAP = "full_shap"
    TREES = "trees"


__all__ = ["Collection", "CollectionKeys"]
