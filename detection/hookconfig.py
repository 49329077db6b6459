"""The hook configuration of every detection run, built as `sdlocal run` builds it.

`sdlocal run` merges the default collections of the job's built-in rules into the request's
CollectionConfigurations (launcher/spec/collection_configs.py). A detection run stands for a job with ALL
built-in rules attached, so it gets all their defaults, plus a short `save_interval` in
HookParameters (which, as under `sdlocal run`, replaces the rules' `save_interval=500`), plus the
explicit entry a user would add where a rule default's regex names another framework's tensor
(USER_COLLECTIONS; the whole request is printed in the matrix footnotes).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from sdlocal.evaluator.registry import BUILTIN_RULES
from sdlocal.hook.config import HookConfig
from sdlocal.launcher.spec.collection_configs import (
    CollectionConfig,
    merge_collections,
    rule_default_collections,
)

# Every built-in Debugger rule of rules.md that PyTorch runs are judged by (XGBoost runs: detection.xgb).
EXPECTED_RULES: tuple[str, ...] = (
    "VanishingGradient", "ExplodingTensor", "AllZero", "ClassImbalance", "LossNotDecreasing", "Overfit",
    "Overtraining", "SimilarAcrossRuns", "StalledTrainingRule", "TensorVariance", "UnchangedTensor",
    "CheckInputImages", "NLPSequenceRatio", "Confusion", "DeadRelu", "PoorWeightInitialization",
    "SaturatedActivation", "WeightUpdateRatio",
)

SAVE_INTERVAL = "1"

# Collections a user adds explicitly (CollectionConfigurations) so that rules whose defaults
# (smdebug_rulesconfig) name an MXNet-style regex see this PyTorch model's data. (labels,
# predictions, tanh_input and sigmoid_input come with the rules' defaults: launcher/spec/collection_configs.py.)
USER_COLLECTIONS: tuple[CollectionConfig, ...] = (
    CollectionConfig("input_image", {"include_regex": "^ConvNet_input_0$"}),
)


# The rules only XGBoost runs are judged by (detection.xgb.XGBOOST_RULES has the universal ones too).
XGBOOST_ONLY_RULES: tuple[str, ...] = ("FeatureImportanceOverweight", "TreeDepth")


def present_rules() -> list[str]:
    """The rules of EXPECTED_RULES (then the XGBoost ones) that exist now, in that order."""
    return [r for r in (*EXPECTED_RULES, *XGBOOST_ONLY_RULES) if r in BUILTIN_RULES]


def missing_rules() -> list[str]:
    return [r for r in (*EXPECTED_RULES, *XGBOOST_ONLY_RULES) if r not in BUILTIN_RULES]


def hook_request(
    rules: Iterable[str] | None = None,
    user_collections: Iterable[CollectionConfig] = USER_COLLECTIONS,
    hook_parameters: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """DebugHookConfig's HookParameters + merged CollectionConfigurations, as `sdlocal run` writes
    them into debughookconfig.json (without LocalPath)."""
    params = dict(hook_parameters or {"save_interval": SAVE_INTERVAL})
    names = list(rules) if rules is not None else list(EXPECTED_RULES)
    defaults = [c for r in names for c in rule_default_collections(r)]
    merged = merge_collections(user_collections, defaults, params)
    return {"HookParameters": params, "CollectionConfigurations": [c.to_request() for c in merged]}


def hook_config(local_path: str | Path, request: Mapping[str, Any] | None = None) -> HookConfig:
    body = dict(request if request is not None else hook_request())
    body["LocalPath"] = str(local_path)
    return HookConfig.from_dict(body)
