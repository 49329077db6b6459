"""Merging collection configurations: the rules' defaults and the user's entries.

Precedence (documented in README and tested):

1. A request may carry several `CollectionConfigurations` entries for one collection (the
   SageMaker SDK emits the rule's default entry *and* the user's). They are merged into one entry,
   key by key. Entries equal to a default of a built-in rule in the same request are applied first,
   the other (explicit) entries after them, in request order: **the user's explicit entry wins over a
   rule's default**, and keys only one of them sets are kept.
2. Each built-in Debugger rule then brings its default collections, which the rule class owns
   (`default_collections`, read through `sdlocal.evaluator.registry.default_collections`):
   smdebug_rulesconfig's ruleConfigs.json entries, then sdlocal's for the data a rule reads that
   ruleConfigs.json leaves out (ClassImbalance/Confusion read `labels`/`predictions`,
   SaturatedActivation `tanh_input`/`sigmoid_input`, PoorWeightInitialization also `gradients`).
   A collection the request does not name is added; for one it names, the request's keys win and
   the default only fills missing keys. Profiler rules bring none.
3. A rule default's save schedule (`save_interval`, `save_steps`, `start_step`, `end_step`, with
   or without a `train.`/`eval.`/... prefix) is dropped when the user's HookParameters set any
   schedule key: `--hook-param save_interval=5` then applies to the rules' collections too.
   (On SageMaker the SDK writes the rule's `save_interval=500` into the request and it silently
   overrides the hook's; a short local job would then save only step 0. A request that spells the
   500 out itself still gets it: rule 1 keeps explicit entries as they are.)
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CollectionConfig:
    name: str
    parameters: Mapping[str, str]

    def to_request(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"CollectionName": self.name}
        if self.parameters:
            entry["CollectionParameters"] = dict(self.parameters)
        return entry


def rule_default_collections(rule_to_invoke: str) -> list[CollectionConfig]:
    """Default collections of a built-in rule, as its class declares them ([] for a rule with
    none, a profiler rule, or a name that is not a built-in rule)."""
    from sdlocal.evaluator.registry import default_collections

    return [CollectionConfig(c.name, c.parameter_map) for c in default_collections(rule_to_invoke)]


SCHEDULE_KEYS = ("save_interval", "save_steps", "start_step", "end_step")


def is_schedule_key(key: str) -> bool:
    return key.rsplit(".", 1)[-1] in SCHEDULE_KEYS


def merge_collections(
    entries: Iterable[CollectionConfig],
    rule_defaults: Iterable[CollectionConfig],
    hook_parameters: Mapping[str, str] | None = None,
) -> tuple[CollectionConfig, ...]:
    """Apply the precedence above; keeps the order in which collections were first named."""
    defaults = list(rule_defaults)
    if any(is_schedule_key(k) for k in hook_parameters or {}):
        defaults = [
            CollectionConfig(d.name, {k: v for k, v in d.parameters.items() if not is_schedule_key(k)})
            for d in defaults
        ]
    default_keys = {(d.name, tuple(sorted(d.parameters.items()))) for d in defaults}
    grouped: dict[str, list[CollectionConfig]] = {}
    for entry in entries:
        grouped.setdefault(entry.name, []).append(entry)

    merged: dict[str, dict[str, str]] = {}
    for name, group in grouped.items():
        from_rules = [e for e in group if (e.name, tuple(sorted(e.parameters.items()))) in default_keys]
        explicit = [e for e in group if e not in from_rules]
        params: dict[str, str] = {}
        for entry in from_rules + explicit:
            params.update(entry.parameters)
        merged[name] = params

    for default in defaults:
        if default.name in merged:
            merged[default.name] = {**default.parameters, **merged[default.name]}
        else:
            merged[default.name] = dict(default.parameters)
    return tuple(CollectionConfig(name, params) for name, params in merged.items())
