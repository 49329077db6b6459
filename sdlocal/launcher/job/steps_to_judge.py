"""After the training: a warning for each Debugger rule whose collections were saved at fewer than
2 steps, with the numbers.

The SageMaker Python SDK writes each built-in rule's collection with `save_interval: "500"` into the
request; a 50-step job then saves those collections at step 0 only, and a rule that compares steps
has one step to judge and says NoIssuesFound. The hook's step record (hook/step_record.py: steps
run, per collection the steps its schedule had it saved and the steps it saved a tensor of it at)
tells how many steps the training ran; the trial alone cannot. Saved steps are counted, not
scheduled ones: a `losses` collection scheduled at every step that never got a tensor (a loss the
hook never saw) was saved at 0 steps (the rule then ends Error saying so: evaluator/unjudged.py).
A record without saved counts (the XGBoost hook's) counts scheduled steps. A training that ran
fewer than 2 steps, a custom rule that names no collection, or a trial written by another hook (no
record) gets no warning.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from sdlocal.evaluator.params import parse_str_list
from sdlocal.hook.step_record import RECORD_NAME
from sdlocal.launcher.spec.collection_configs import CollectionConfig, rule_default_collections
from sdlocal.launcher.spec.model import RuleSpec

DEFAULT_SAVE_INTERVAL = "500"  # smdebug's, when neither the collection nor HookParameters set one


def read_record(tensors_dir: Path) -> Mapping[str, Any] | None:
    try:
        record = json.loads((tensors_dir / RECORD_NAME).read_text())
    except (OSError, ValueError):
        return None
    ok = isinstance(record, dict) and isinstance(record.get("steps"), int) \
        and isinstance(record.get("scheduled_steps"), dict)
    return record if ok else None


def rule_collections(rule: RuleSpec) -> list[str]:
    """The collections a rule reads: its `collection_names` parameter, else its defaults."""
    named = rule.parameters.get("collection_names")
    if named:
        return list(parse_str_list(rule.name, "collection_names", named))  # as the evaluator reads it
    if rule.is_custom:
        return []
    return [c.name for c in rule_default_collections(rule.rule_to_invoke)]


def _schedule(name: str, collections: Iterable[CollectionConfig], hook_parameters: Mapping[str, str]) -> str:
    params: Mapping[str, str] = next((c.parameters for c in collections if c.name == name), {})
    for source in (params, hook_parameters):
        for key in ("save_steps", "save_interval"):
            if key in source:
                return f"{key} {source[key]}"
    return f"save_interval {DEFAULT_SAVE_INTERVAL}, the default"


def _unsaved(name: str, saved: int, scheduled: Mapping[str, Any]) -> str:
    """", scheduled at 50 steps" when the schedule had it saved at more steps than it got tensors at."""
    planned = scheduled.get(name)
    return f", scheduled at {planned}" if isinstance(planned, int) and planned > saved else ""


def few_steps_warnings(rules: Iterable[RuleSpec], tensors_dir: Path, collections: Iterable[CollectionConfig],
                       hook_parameters: Mapping[str, str]) -> list[str]:
    record = read_record(tensors_dir)
    if record is None or record["steps"] < 2:
        return []
    steps, scheduled = record["steps"], record["scheduled_steps"]
    saved = record.get("saved_steps")
    counted = saved if isinstance(saved, dict) else scheduled
    configs = list(collections)
    lines = []
    for rule in rules:
        few = [(c, counted[c]) for c in rule_collections(rule)
               if isinstance(counted.get(c), int) and counted[c] < 2]
        if not few:
            continue
        what = "; ".join(f"'{c}' at {n} ({_schedule(c, configs, hook_parameters)}{_unsaved(c, n, scheduled)})"
                         for c, n in few)
        lines.append(f"Warning: rule {rule.name} had fewer than 2 steps to judge: the training ran {steps} steps "
                     f"and saved {what}. Set a smaller save_interval in those collections' CollectionParameters "
                     "(DebugHookConfig.CollectionConfigurations).")
    return lines
