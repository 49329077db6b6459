"""No verdict without data: why a tensor rule that ran to the end of training must not say
NoIssuesFound (evaluator/loop.py asks `never_saw` before the final status of a rule that never fired).

NoIssuesFound reads as "checked and healthy". A rule whose tensors were never saved checked
nothing: a Hugging Face model computes its loss inside its own `forward`, a Lightning
`training_step` calls `F.cross_entropy`, a collection name has a typo; the trial then has steps but
no tensor of `losses` (or no `losses` at all), and LossNotDecreasing would pass a run whose loss
climbs to 1e4. Such a rule ends `Error` with StatusDetails
`ClientError: Rule LossNotDecreasing judged nothing: no tensor of collection 'losses' was saved: ...`
naming what it never saw and what the trial has.

When a rule counts as blind:
- Built-in rules read their tensors through `TensorSelection`s (collections and/or a regex, the
  rule's defaults included). A selection that selects no tensor of the whole trial never saw
  anything. The rule is blind when it judged no step (Datapoints 0) and one of its selections is
  (Confusion with labels but no predictions). A rule that judged steps with the tensors it had
  keeps its verdict, and so does one that found its tensors but judged no step (too few yet).
- A rule without selections (ClassImbalance, TreeDepth, CreateXgboostReport, custom rules) that
  judged no step: blind when the collections the request names, else the regexes it finds its
  tensors by (ClassImbalance's `labels_regex`), else its default collections, have no tensor; a
  custom rule also when the trial has steps (each lacked a tensor it reads:
  smdebug's missing data errors, or the rule answered Verdict.NOT_EVALUATED at every step).
- Custom rules are judged as the request and their behaviour show: SageMaker's rule invoker
  (smdebug `invoke_rule`) skips a step whose tensors are missing, so there a custom rule whose
  tensors never came ends NoIssuesFound; sdlocal ends it Error when it judged no step at all and
  steps were skipped for missing data (a verdict that covered nothing), and leaves a custom rule
  that judged any step, or read nothing, as it is.
- Rules that read no tensors (StalledTrainingRule judges time) are never blind.
"""
from __future__ import annotations

import re
from typing import Any

from sdlocal.evaluator.rules._select import TensorSelection

LOSS_HINT = ("the hook saves a loss module it sees called (nn.CrossEntropyLoss()); a loss computed inside the "
             "model's forward or by a function (F.cross_entropy) is saved with hook.register_loss or hook.save_scalar")


def never_saw(rule: Any, trial: Any) -> str | None:
    """A one-sentence reason when `rule` judged nothing because its tensors were never saved, else None."""
    try:
        return _never_saw(rule, trial)
    except Exception:  # noqa: BLE001 - the check only adds a reason; it must not end the evaluation
        return None


def _never_saw(rule: Any, trial: Any) -> str | None:
    own = getattr(rule, "missing_data", None)  # a rule that reads no tensors says itself (records rules)
    if callable(own):
        missing = own()
        return None if missing is None else f"Rule {rule.rule_name} judged nothing: {missing}."
    report = getattr(rule, "report", None)
    judged = report.get("Datapoints", 1) if isinstance(report, dict) else 1
    # a selection of nothing (no collection, no regex, not "every tensor") reads nothing by design
    selections = [v for v in vars(rule).values()
                  if isinstance(v, TensorSelection) and not (v.empty and not v.select_all_if_empty)]
    if selections:
        blind = [s for s in selections if not s.names(trial)]
        if not blind or judged:
            return None
        missing = "; ".join(dict.fromkeys(_describe(s, trial) for s in blind))
        losses = any("losses" in s.collections for s in blind)
    elif judged:
        return None
    else:
        wanted = list(getattr(rule, "requested_collections", ()))
        patterns = [v for v in vars(rule).values() if isinstance(v, re.Pattern)]
        if not wanted and patterns:  # a rule that finds its tensors by name (ClassImbalance's regexes)
            names = trial.tensor_names()
            if any(p.search(n) for p in patterns for n in names):
                return None
            regexes = ", ".join(repr(p.pattern) for p in patterns)
            return (f"Rule {rule.rule_name} judged nothing: no saved tensor matches {regexes}: "
                    f"{_what_was_saved(trial)}. Check DebugHookConfig.CollectionConfigurations and the rule's "
                    "parameters.")
        wanted = wanted or [c.name for c in getattr(rule, "default_collections", ())]
        known = trial.collections()
        empty = [c for c in wanted if c not in known or not trial.tensor_names(collection=c)]
        steps = len(trial.steps())
        if empty:
            missing = _no_tensor_of(empty)
            losses = "losses" in empty
        elif steps and getattr(type(rule), "group", None) is None:
            # a custom rule that judged none of the steps: each lacked a tensor it reads
            missing = f"none of the {steps} steps had the tensors it reads"
            losses = False
        else:
            return None
    return (f"Rule {rule.rule_name} judged nothing: {missing}: {_what_was_saved(trial)}"
            + (f"; {LOSS_HINT}" if losses else "")
            + ". Check DebugHookConfig.CollectionConfigurations and the rule's parameters.")


def _no_tensor_of(collections: list[str]) -> str:
    names = ", ".join(repr(c) for c in collections)
    return f"no tensor of collection{'s' if len(collections) > 1 else ''} {names} was saved"


def _describe(selection: TensorSelection, trial: Any) -> str:
    parts = []
    if selection.collections:
        parts.append(_no_tensor_of(list(selection.collections)))
    if selection.regex_texts:
        regexes = ", ".join(repr(r) for r in selection.regex_texts)
        parts.append(f"no saved tensor matches {regexes}")
    return " and ".join(parts) or "no tensor was saved"


def _what_was_saved(trial: Any) -> str:
    steps = trial.steps()
    if not steps:
        return "the trial has no step"
    known = trial.collections()
    having = [name for name in sorted(known) if trial.tensor_names(collection=name)]
    return (f"the trial has {len(steps)} step{'s' if len(steps) > 1 else ''} with tensors of "
            f"{', '.join(having) if having else 'no collection'} (its collections: {', '.join(sorted(known)) or 'none'})")
