"""FeatureImportanceOverweight (XGBoost): a few features carry almost all of the model."""
from __future__ import annotations

from typing import Any

import numpy as np

from sdlocal.evaluator.params import parse_float, parse_int
from sdlocal.evaluator.rule import DefaultCollection, Rule, Verdict
from sdlocal.evaluator.rules._select import TensorSelection, value_or_none

# Boosting rounds (global steps of the XGBoost hook) whose importances are not judged: one or a few
# shallow trees split on a handful of features whatever the data (a healthy depth-3 model's first
# tree gives its top 3 features 86 % of the weight; by round 10 they hold 68 %, 62 % at round 40).
MIN_ROUNDS = 10


class FeatureImportanceOverweight(Rule):
    """Fires when the `nfeatures` most important features together hold more than `threshold` of
    the importance, at a step that saved feature importances.

    Importances are the tensors matching `tensor_regex` (the XGBoost hook saves
    `feature_importance/<type>/<feature>`, each type normalized to sum to 1; default: the `weight`
    type, how many splits use each feature). Choices: the values are normalized again at each step
    (a trial written by another hook may not be); a model that uses `nfeatures` features or fewer
    has all its importance in them and fires at any threshold below 1 (a model leaning on one or
    two features is what the rule is for); steps without importances, and the first `MIN_ROUNDS`
    (10) steps, are not evaluated (a few trees use few features on any data).
    """

    group = "XGBoost"
    default_collections = (DefaultCollection.of("feature_importance", {"save_interval": "500"}),)

    def __init__(self, base_trial: Any, threshold: object = 0.8, nfeatures: object = 3,
                 tensor_regex: object = ".*feature_importance/weight", action_str: str = "") -> None:
        super().__init__(base_trial, action_str=action_str)
        rule = self.rule_name
        self.threshold = float(parse_float(rule, "threshold", threshold, minimum=0.0, maximum=1.0))  # type: ignore[arg-type]
        self.nfeatures = int(parse_int(rule, "nfeatures", nfeatures, minimum=1))  # type: ignore[arg-type]
        self.selection = TensorSelection(rule, None, tensor_regex, select_all_if_empty=False)

    def invoke_at_step(self, step: int) -> Verdict:
        if step < MIN_ROUNDS:
            return Verdict.NOT_EVALUATED
        values = []
        for name in self.selection.names(self.base_trial, step):
            value = value_or_none(self.base_trial.tensor(name), step)
            if value is not None and value.size:
                values.append(float(np.nansum(value)))
        scores = np.array([v for v in values if np.isfinite(v) and v > 0])
        if not scores.size:
            return Verdict.NOT_EVALUATED
        top = np.sort(scores)[::-1][: self.nfeatures].sum() / scores.sum()
        if top > self.threshold:
            self.logger.info("%s: the top %d of %d features hold %.1f%% of the importance at step %d",
                             self.rule_name, min(self.nfeatures, scores.size), scores.size, 100 * top, step)
            return Verdict.CONDITION_MET
        return Verdict.CONDITION_NOT_MET
