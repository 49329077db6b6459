"""Merging collection configurations: the rules' defaults and the user's entries.

Precedence (documented in README and tested in every order of the request's entries):

1. A request may carry several `CollectionConfigurations` entries for one collection (the
   SageMaker SDK v2 emits its copy of each rule's default entry *and* the user's, in an order that
   depends on Python's hash seed: it de-duplicates them through a set). They are merged into one
   entry, key by key. An entry equal to a default of a built-in rule in the same request, as the
   rule declares it (the SDK's copy, `save_interval: "500"` included), is a rule default: these
   are applied first, the earlier rule's (DebugRuleConfigurations order) keys over a later one's;
   the other (explicit) entries after them, in request order: **the user's explicit entry wins over
   a rule's default**, and keys only one of them sets are kept. Nothing here depends on the order
   of the entries but two explicit entries for one collection that set one key differently (the
   later wins, as smdebug's reader of the hook config does).
2. Each built-in Debugger rule then brings its default collections, which the rule class owns
   (`default_collections`, read through `sdlocal.evaluator.registry.default_collections`):
   smdebug_rulesconfig's ruleConfigs.json entries, then sdlocal's for the data a rule reads that
   ruleConfigs.json leaves out (ClassImbalance/Confusion read `labels`/`predictions`,
   SaturatedActivation `tanh_input`/`sigmoid_input`, PoorWeightInitialization also `gradients`).
   A collection the request does not name is added; for one it names, the request's keys win and
   the default only fills missing keys (between two rules, the earlier rule's). Profiler rules
   bring none.
3. A rule default's save schedule (`save_interval`, `save_steps`, `start_step`, `end_step`, with
   or without a `train.`/`eval.`/... prefix) is dropped from what rule 2 adds when the user's
   HookParameters set any schedule key: `--hook-param save_interval=5` then applies to the rules'
   collections too. (On SageMaker the SDK writes the rule's `save_interval=500` into the request
   and it silently overrides the hook's; a short local job would then save only step 0.) A request
   that spells the 500 out, the SDK's copy of a rule's entry included, still gets it: rule 1 applies
   the request's entries as they are, and the user's own entry for the collection wins over it.
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


def _key(config: CollectionConfig) -> tuple[str, tuple[tuple[str, str], ...]]:
    return config.name, tuple(sorted(config.parameters.items()))


def _without_schedule(config: CollectionConfig) -> CollectionConfig:
    return CollectionConfig(config.name, {k: v for k, v in config.parameters.items() if not is_schedule_key(k)})


def merge_collections(
    entries: Iterable[CollectionConfig],
    rule_defaults: Iterable[CollectionConfig],
    hook_parameters: Mapping[str, str] | None = None,
) -> tuple[CollectionConfig, ...]:
    """Apply the precedence above; keeps the order in which collections were first named.
    `rule_defaults`: the request's built-in rules' defaults, in the order of its rules."""
    declared = list(rule_defaults)
    # A request's entry is a rule's default when it equals one as the rule declares it (the SDK
    # copies it so), whatever HookParameters say; its rank is the first rule declaring it.
    rank: dict[tuple[str, tuple[tuple[str, str], ...]], int] = {}
    for i, default in enumerate(declared):
        rank.setdefault(_key(default), i)
    grouped: dict[str, list[CollectionConfig]] = {}
    for entry in entries:
        grouped.setdefault(entry.name, []).append(entry)

    merged: dict[str, dict[str, str]] = {}
    for name, group in grouped.items():
        copies = sorted({_key(e) for e in group if _key(e) in rank}, key=rank.__getitem__)
        params: dict[str, str] = {}
        for _name, items in reversed(copies):  # the earlier rule's keys win
            params.update(items)
        for entry in group:
            if _key(entry) not in rank:
                params.update(entry.parameters)
        merged[name] = params

    if any(is_schedule_key(k) for k in hook_parameters or {}):
        declared = [_without_schedule(d) for d in declared]
    for default in declared:
        if default.name in merged:
            merged[default.name] = {**default.parameters, **merged[default.name]}
        else:
            merged[default.name] = dict(default.parameters)
    return tuple(CollectionConfig(name, params) for name, params in merged.items())
