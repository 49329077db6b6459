"""The built-in profiler rules (rules.md, "Profiler rules"), one module per rule, each a
`sdlocal.evaluator.profiler_rule.ProfilerRule` with `group = "profiler"`; ProfilerReport runs all of them.
Adding a rule is adding a module (ProfilerReport's list of sub-rules is `SUB_RULES` there)."""
from __future__ import annotations

from typing import Any

from sdlocal.evaluator.rule import Rule
from sdlocal.evaluator.rules import rule_classes_in


def builtin_profiler_rule_classes() -> list[type[Rule]]:
    """The built-in profiler rule classes, sorted by name."""
    return rule_classes_in(__name__, list(__path__))


def __getattr__(name: str) -> Any:
    """`from sdlocal.evaluator.profiler_rules import StepOutlier` works for every built-in profiler rule."""
    if not name[:1].isupper():  # a submodule being imported (`from ... import _stats`)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    for cls in builtin_profiler_rule_classes():
        if cls.__name__ == name:
            return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
