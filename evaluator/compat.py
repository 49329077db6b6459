"""Aliases that let custom rules written for smdebug import their base class from here:
`from smdebug.rules.rule import Rule`, `from smdebug.exceptions import ...`."""
from __future__ import annotations

import contextlib
import sys
import types
from collections.abc import Iterator

from trial import errors as trial_errors


def _modules() -> dict[str, types.ModuleType]:
    from evaluator import rule as rule_module

    smdebug = types.ModuleType("smdebug")
    rules = types.ModuleType("smdebug.rules")
    rule = types.ModuleType("smdebug.rules.rule")
    req = types.ModuleType("smdebug.rules.req_tensors")
    exceptions = types.ModuleType("smdebug.exceptions")
    rule.Rule = rule_module.Rule  # type: ignore[attr-defined]
    rules.Rule = rule_module.Rule  # type: ignore[attr-defined]
    req.RequiredTensors = rule_module.RequiredTensors  # type: ignore[attr-defined]
    for name in (
        "TensorUnavailable",
        "TensorUnavailableForStep",
        "StepUnavailable",
        "StepNotYetAvailable",
        "NoMoreData",
        "MissingCollectionFiles",
    ):
        setattr(exceptions, name, getattr(trial_errors, name))
    exceptions.RuleEvaluationConditionMet = rule_module.RuleEvaluationConditionMet  # type: ignore[attr-defined]
    smdebug.rules = rules  # type: ignore[attr-defined]
    smdebug.exceptions = exceptions  # type: ignore[attr-defined]
    rules.rule = rule  # type: ignore[attr-defined]
    rules.req_tensors = req  # type: ignore[attr-defined]
    return {
        "smdebug": smdebug,
        "smdebug.rules": rules,
        "smdebug.rules.rule": rule,
        "smdebug.rules.req_tensors": req,
        "smdebug.exceptions": exceptions,
    }


@contextlib.contextmanager
def smdebug_aliases() -> Iterator[None]:
    """Temporarily map smdebug's rule modules to ours (a real smdebug, if imported, is restored)."""
    aliases = _modules()
    saved = {name: sys.modules.get(name) for name in aliases}
    sys.modules.update(aliases)
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
