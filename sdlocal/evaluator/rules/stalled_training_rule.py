"""StalledTrainingRule: the training stopped writing steps."""
from __future__ import annotations

import json
import os
from typing import Any

from sdlocal.evaluator.contract import JOB_NAME
from sdlocal.evaluator.errors import RuleParameterError
from sdlocal.evaluator.params import is_none, parse_bool, parse_float
from sdlocal.evaluator.rule import Rule, Verdict

JOB_NAME_ENV = JOB_NAME  # evaluator/contract.py


class StalledTrainingRule(Rule):
    """Fires when no new step has been written for `threshold` seconds.

    The rule judges time, not data: the evaluator loop calls `invoke_idle(idle_s)` on every poll
    of a live trial that brought no new step, with the seconds since the loop last saw a new step
    (or since the evaluator started, when no step has arrived at all). Choice: the time a step was
    *seen* by the loop stands for the time it was written (our reader does not expose the events'
    wall time); the error is at most one polling interval. A step that arrives is never a stall
    (`invoke_at_step` → not met), so a finished trial evaluated afterwards (`sdlocal evaluate`)
    cannot fire: the rule only applies while following a live training.

    `stop_training_on_fire=True` sets `action_str` to a StopTraining action for
    `training_job_name_prefix` (default: this job's name, `SDLOCAL_JOB_NAME`, read when the rule
    is built); the evaluator executes it the first time the rule fires.
    """

    group = "universal"

    def __init__(
        self,
        base_trial: Any,
        threshold: object = 1800,
        stop_training_on_fire: object = False,
        training_job_name_prefix: object = None,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, action_str=action_str)
        rule = self.rule_name
        self.threshold = float(parse_float(rule, "threshold", threshold, minimum=0.0))  # type: ignore[arg-type]
        self.stop_training_on_fire = parse_bool(rule, "stop_training_on_fire", stop_training_on_fire)
        prefix = None if is_none(training_job_name_prefix) else str(training_job_name_prefix).strip()
        self.training_job_name_prefix = prefix or os.environ.get(JOB_NAME_ENV) or None
        self._stalled = False  # in a stall already counted (until the next new step)
        if self.stop_training_on_fire:
            if self.training_job_name_prefix is None:
                raise RuleParameterError(
                    rule,
                    "training_job_name_prefix",
                    training_job_name_prefix,
                    f"required with stop_training_on_fire=True when {JOB_NAME_ENV} is not set",
                )
            self.action_str = json.dumps(
                [{"name": "StopTraining", "training_job_prefix": self.training_job_name_prefix}]
            )

    def invoke_at_step(self, step: int) -> Verdict:
        # a new step is progress: the training is not stalled (a later stall is a new one)
        self._stalled = False
        return Verdict.CONDITION_NOT_MET

    def invoke_idle(self, idle_s: float) -> Verdict:
        """`idle_s` seconds have passed without a new step (called by the evaluator loop on every
        poll): a stall is logged and counted once, when it crosses the threshold."""
        if idle_s < self.threshold:
            return Verdict.NOT_EVALUATED
        if not self._stalled:
            self._stalled = True
            self.logger.info("%s: no new step for %.1f s (threshold %g s)", self.rule_name, idle_s, self.threshold)
            self.report["RuleTriggered"] += 1
            self.report["Violations"] += 1
            self.report["Datapoints"] += 1
        return Verdict.CONDITION_MET
