"""smdebug's `invoke_rule`: run a rule step after step, in the user's own Python (a notebook) or a
script, the way smdebug's documentation shows.

Deliberate difference from smdebug: when the rule asks for a step past the end of a finished
training (`NoMoreData`, raised by `Rule.invoke`'s wait), `invoke_rule` returns normally: the
evaluation is complete. smdebug lets NoMoreData out of `invoke_rule`, and its documentation wraps
the call in `try: ... except NoMoreData: print("... This is expected behavior.")`; that code still
runs here (its except branch is simply not taken). A step whose shape is missing
(`ShapeUnavailableForStep`) is skipped as a missing value is; smdebug would let it out.
"""
from __future__ import annotations

import logging
from typing import Any

from sdlocal.trial.errors import (
    NoMoreData,
    NoMoreProfilerData,
    RuleEvaluationConditionMet,
    ShapeUnavailableForStep,
    StepUnavailable,
    TensorUnavailable,
    TensorUnavailableForStep,
)

logger = logging.getLogger("sdlocal.evaluator.rule_invoker")

_SKIPPED = (TensorUnavailableForStep, StepUnavailable, TensorUnavailable, ShapeUnavailableForStep)


def invoke_rule(rule_obj: Any, start_step: int | None = 0, end_step: int | None = None, raise_eval_cond: bool = False) -> None:
    """Call `rule_obj.invoke(step)` for step = start_step, start_step + 1, ... up to `end_step`
    (exclusive), or until training has ended and no step is left (each `invoke` waits for its
    step on a live trial). Steps without the data the rule needs are skipped. A met condition
    (`RuleEvaluationConditionMet`) is raised out when `raise_eval_cond`, else the rule goes on,
    unless the exception says `end_of_rule`."""
    step = start_step if start_step is not None else 0
    name = type(rule_obj).__name__
    logger.info("Started execution of rule %s at step %s", name, step)
    while end_step is None or step < end_step:
        try:
            rule_obj.invoke(step)
        except _SKIPPED as exc:
            logger.debug("%s", exc)
        except RuleEvaluationConditionMet as exc:
            if raise_eval_cond:
                raise
            logger.debug("%s", exc)
            if exc.end_of_rule:
                break
        except NoMoreData as exc:
            logger.info("No more data for rule %s: %s", name, exc)
            break
        except NoMoreProfilerData as exc:
            logger.info("No more profiler data for rule %s at timestamp %s", name, exc.timestamp)
            break
        step += 1
    logger.info("Ended execution of rule %s at end_step %s", name, step - 1)
