"""TreeDepth (XGBoost): the trees grow deeper than wanted."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from sdlocal.evaluator.params import parse_int
from sdlocal.evaluator.rule import DefaultCollection, Rule, Verdict
from sdlocal.evaluator.rules._select import value_or_none


class TreeDepth(Rule):
    """Fires when a tree saved at a step is deeper than `depth`.

    A tree's depth is SageMaker's estimate, floor(log2(largest node id)), from the `trees/Node`
    tensor (node ids of the trees built at that step); where the trial also has `trees/Depth`
    (sdlocal's XGBoost hook saves each node's depth) the true depth is used instead, the largest
    node depth of each tree. Choices: the direction is "too deep" (deep trees memorize: the
    detection suite's fault is max_depth 10 on noisy data), so a tree of depth `depth` or less
    never fires; a step without trees is not evaluated.
    """

    group = "XGBoost"
    default_collections = (DefaultCollection.of("trees"),)  # sdlocal's

    def __init__(self, base_trial: Any, depth: object = 4, action_str: str = "") -> None:
        super().__init__(base_trial, action_str=action_str)
        self.depth = int(parse_int(self.rule_name, "depth", depth, minimum=0))  # type: ignore[arg-type]

    def _column(self, name: str, step: int) -> np.ndarray | None:
        if name not in self.base_trial.tensor_names(step=step):
            return None
        return value_or_none(self.base_trial.tensor(name), step)

    def tree_depth(self, step: int) -> int | None:
        exact = self._column("trees/Depth", step)
        if exact is not None and exact.size:
            return int(np.nanmax(exact))
        nodes = self._column("trees/Node", step)
        if nodes is None or not nodes.size:
            return None
        largest = float(np.nanmax(nodes))
        return int(math.floor(math.log2(largest))) if largest >= 1 else 0

    def invoke_at_step(self, step: int) -> Verdict:
        depth = self.tree_depth(step)
        if depth is None:
            return Verdict.NOT_EVALUATED
        if depth > self.depth:
            self.logger.info("%s: trees of depth %d at step %d (limit %d)", self.rule_name, depth, step, self.depth)
            return Verdict.CONDITION_MET
        return Verdict.CONDITION_NOT_MET
