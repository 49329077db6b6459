"""One rule registry: built-in rules by class name (SageMaker's `rule_to_invoke`), custom rules
loaded from a Python file, and instantiation from string parameters.

Each rule class carries its metadata (evaluator/rule.py): `kind` ("tensor": its evaluator judges
the steps of the debug-output trial; "profiler": windows of time of the profiler-output),
`default_collections` (what the hook must save for it; the launcher merges them with the user's
CollectionConfigurations) and `group` (the `sdlocal rules` listing). `rule_kind(name)` and
`default_collections(name)` answer for a built-in rule by name; a custom rule's kind is its
class's (`ProfilerRule` subclasses are profiler rules).
"""
from __future__ import annotations

import difflib
import importlib.util
import inspect
import sys
import traceback
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sdlocal.evaluator.errors import CustomRuleError, RuleParameterError, UnknownRuleError
from sdlocal.evaluator.profiler_rules import builtin_profiler_rule_classes
from sdlocal.evaluator.rule import DefaultCollection, Rule, RuleKind
from sdlocal.evaluator.rules import builtin_rule_classes
from sdlocal.trial.errors import TrialError
from sdlocal.trial.smdebug_shim import use_sdlocal_smdebug

# Built-in rules by class name; each rule module of evaluator/rules/ (tensor rules) and
# evaluator/profiler_rules/ (profiler rules) contributes its classes.
BUILTIN_RULES: dict[str, type[Rule]] = {
    cls.__name__: cls for cls in [*builtin_rule_classes(), *builtin_profiler_rule_classes()]
}
# The `sdlocal rules` listing's order of groups (rules.md's; sdlocal's own Debugger rules before the
# profiler rules: docs/rules-beyond-debugger.md), then any other.
GROUP_ORDER = ("universal", "deep learning", "DL applications", "XGBoost", "beyond Debugger", "profiler")

# Parameters every Rule constructor may take that are not rule parameters proper.
_FRAMEWORK_PARAMETERS = ("base_trial", "action_str", "other_trials")


@dataclass(frozen=True)
class RuleInfo:
    name: str
    group: str
    parameters: tuple[tuple[str, str], ...]  # (name, default as a string; "" when required)
    description: str
    kind: RuleKind = RuleKind.DEBUGGER
    default_collections: tuple[DefaultCollection, ...] = ()


def rule_kind(rule: str | type[Rule]) -> RuleKind:
    """A rule class's kind, or a built-in rule's by name (UnknownRuleError)."""
    cls = get_rule_class(rule) if isinstance(rule, str) else rule
    return RuleKind.PROFILER if getattr(cls, "kind", RuleKind.DEBUGGER) == RuleKind.PROFILER else RuleKind.DEBUGGER


def default_collections(rule_to_invoke: str) -> tuple[DefaultCollection, ...]:
    """The collections a built-in rule reads (smdebug_rulesconfig's defaults, then sdlocal's); ()
    for a rule with none, a profiler rule, or a name that is not a built-in rule."""
    cls = BUILTIN_RULES.get(rule_to_invoke)
    return tuple(getattr(cls, "default_collections", ())) if cls is not None else ()


def get_rule_class(name: str) -> type[Rule]:
    """The built-in rule class called `name`; `UnknownRuleError` with close matches otherwise."""
    try:
        return BUILTIN_RULES[name]
    except KeyError:
        pass
    by_lower = {n.lower(): n for n in BUILTIN_RULES}
    if name.lower() in by_lower:
        suggestions = [by_lower[name.lower()]]
    else:
        suggestions = difflib.get_close_matches(name, list(BUILTIN_RULES), n=3, cutoff=0.6)
    raise UnknownRuleError(name, suggestions)


def _parameters_of(cls: type) -> tuple[tuple[str, str], ...]:
    out = []
    for param in inspect.signature(cls).parameters.values():
        if param.name == "self" or param.name in _FRAMEWORK_PARAMETERS:
            continue
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        default = "" if param.default is inspect.Parameter.empty else str(param.default)
        out.append((param.name, default))
    return tuple(out)


def builtin_rule_infos() -> list[RuleInfo]:
    """Every built-in rule, by group (GROUP_ORDER) then name, with its parameters, kind, default
    collections and a one-line description."""
    infos = []
    for name in sorted(BUILTIN_RULES):
        cls = BUILTIN_RULES[name]
        doc = inspect.getdoc(cls) or ""
        params = _parameters_of(cls) + tuple(getattr(cls, "extra_parameters", ()))
        infos.append(RuleInfo(name, getattr(cls, "group", "custom"), params,
                              " ".join(doc.split("\n\n")[0].split()), rule_kind(cls),
                              tuple(getattr(cls, "default_collections", ()))))
    order = {g: i for i, g in enumerate(GROUP_ORDER)}
    return sorted(infos, key=lambda i: (order.get(i.group, len(order)), i.name))


def _last_traceback_line(exc: BaseException) -> str:
    lines = traceback.format_exception_only(type(exc), exc)
    text = " ".join(line.strip() for line in lines if line.strip())
    return text.splitlines()[-1] if text else type(exc).__name__


def load_custom_rule(path: str | Path, class_name: str) -> type[Rule]:
    """Import the Python file `path` and return its class `class_name`.

    Files written for smdebug work: `import smdebug` (`smdebug.rules.rule`, `smdebug.trials`,
    `smdebug.modes`, `smdebug.exceptions`, ...) is sdlocal's compat package in this process from
    now on (trial.smdebug_shim.use_sdlocal_smdebug), also for imports the rule makes later.
    Any failure is a `CustomRuleError` with one line naming the file and the cause.
    """
    path = Path(path)
    if not path.is_file():
        raise CustomRuleError(f"Custom rule file {path} does not exist")
    module_name = f"_sdlocal_custom_rule_{uuid.uuid4().hex[:8]}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise CustomRuleError(f"Custom rule file {path} cannot be imported (not a .py file?)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        use_sdlocal_smdebug()
        spec.loader.exec_module(module)
    except BaseException as exc:  # noqa: BLE001 - user code: anything can happen, including SystemExit
        sys.modules.pop(module_name, None)
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise CustomRuleError(f"Custom rule file {path} failed to load: {_last_traceback_line(exc)}") from exc
    cls = getattr(module, class_name, None)
    if cls is None:
        classes = [n for n, v in vars(module).items() if inspect.isclass(v) and v.__module__ == module_name]
        hint = f" (it defines: {', '.join(sorted(classes))})" if classes else ""
        raise CustomRuleError(f"Custom rule file {path} has no class {class_name}{hint}")
    if not inspect.isclass(cls) or not (hasattr(cls, "invoke_at_step") or hasattr(cls, "invoke_at_window")):
        raise CustomRuleError(f"Custom rule file {path}: {class_name} is not a rule class "
                              "(no invoke_at_step or invoke_at_window)")
    if not issubclass(cls, Rule):
        raise CustomRuleError(f"Custom rule file {path}: {class_name} does not derive from Rule "
                              "(or evaluator.ProfilerRule)")
    return cls


def instantiate_rule(
    cls: type[Rule],
    trial: Any,
    params: Mapping[str, object],
    *,
    action_str: str = "",
    other_trials: Sequence[Any] | None = None,
) -> Rule:
    """`cls(trial, **params)`, passing `action_str`/`other_trials` only where the constructor takes
    them. A parameter the constructor does not take is a `RuleParameterError` naming it; a custom
    rule's constructor failing with TypeError/ValueError becomes a `RuleParameterError` too (it is
    how rules reject values); any other failure of it (but the trial's own errors) a `CustomRuleError`."""
    rule_name = cls.__name__
    signature = inspect.signature(cls)
    accepted = signature.parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values())
    kwargs: dict[str, Any] = {}
    for key, value in params.items():
        if key in _FRAMEWORK_PARAMETERS or (key not in accepted and not takes_any):
            known = [n for n, _ in _parameters_of(cls)]
            raise RuleParameterError(
                rule_name, key, value, f"unknown parameter (known: {', '.join(known) or 'none'})"
            )
        kwargs[key] = value
    if action_str and ("action_str" in accepted or takes_any):
        kwargs["action_str"] = action_str
    if other_trials and ("other_trials" in accepted or takes_any):
        kwargs["other_trials"] = list(other_trials)
    try:
        rule = cls(trial, **kwargs)
    except RuleParameterError:
        raise
    except (TypeError, ValueError) as exc:
        raise RuleParameterError(rule_name, "(constructor)", dict(params), _last_traceback_line(exc)) from exc
    except TrialError:
        raise  # the trial's own errors (a tensor the constructor reads is missing): the caller's Error status
    except Exception as exc:  # noqa: BLE001 - any other failure of a custom constructor: an Error status, not a traceback
        raise CustomRuleError(f"Rule {rule_name} could not be built: {_last_traceback_line(exc)}") from exc
    try:  # what the request names: the "judged nothing" check reads them (evaluator/unjudged.py)
        rule.requested_collections = _requested_collections(params)
    except AttributeError:  # a custom rule with __slots__: no such check for it
        pass
    return rule


def _requested_collections(params: Mapping[str, object]) -> tuple[str, ...]:
    """The collections the request names (`collection_names`, Confusion's `labels_collection`, ...),
    as opposed to a rule's defaults, which a trial may lack by design."""
    names: list[str] = []
    for key, value in params.items():
        if key.endswith(("collection_names", "_collection")):
            items = value if isinstance(value, list | tuple) else str(value).split(",")
            names += [str(n).strip() for n in items if str(n).strip()]
    return tuple(dict.fromkeys(names))
