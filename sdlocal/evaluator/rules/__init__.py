"""The built-in rules, one module per rule (class names as SageMaker's `rule_to_invoke`).

Every public module of this package is a rule module: the `Rule` subclasses it defines with a
`group` class attribute (rules.md's groups: "universal", "deep learning", "DL applications", "XGBoost") are
the built-in rules. Adding a rule is adding a module; nothing else is edited.
"""
from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from sdlocal.evaluator.rule import Rule


def rule_classes_in(package: str, path: list[str]) -> list[type[Rule]]:
    """The `Rule` subclasses with a `group` class attribute defined by the public modules of a
    package, sorted by name (evaluator.rules, evaluator.profiler_rules)."""
    found: dict[str, type[Rule]] = {}
    for info in pkgutil.iter_modules(path):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        for value in vars(module).values():
            if (isinstance(value, type) and issubclass(value, Rule) and value.__module__ == module.__name__
                    and "group" in vars(value)):
                found[value.__name__] = value
    return [found[name] for name in sorted(found)]


def builtin_rule_classes() -> list[type[Rule]]:
    """The built-in tensor rule classes of every rule module of this package, sorted by name."""
    return rule_classes_in(__name__, list(__path__))


def __getattr__(name: str) -> Any:
    """`from sdlocal.evaluator.rules import VanishingGradient` works for every built-in rule."""
    for cls in builtin_rule_classes():
        if cls.__name__ == name:
            return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
