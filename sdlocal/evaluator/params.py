"""Parsing of rule parameters. SageMaker passes every RuleParameter as a string ("1e-7", "True",
"weights,biases", "None"); rules also accept native Python values when built in-process.
A bad value raises `RuleParameterError` naming the rule and the parameter."""
from __future__ import annotations

import math
from collections.abc import Iterable

from sdlocal.evaluator.errors import RuleParameterError
from sdlocal.trial.modes import ModeKeys, to_mode

_TRUE = frozenset({"true", "1", "yes"})
_FALSE = frozenset({"false", "0", "no"})


def is_none(value: object) -> bool:
    """None, "None"/"none"/"null" and the empty string all mean "not set"."""
    return value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "null"))


def _required(rule: str, name: str, value: object, allow_none: bool) -> bool:
    """True when the value is unset (and that is allowed); raises when it is unset and required."""
    if is_none(value):
        if allow_none:
            return True
        raise RuleParameterError(rule, name, value, "a value is required")
    return False


def parse_float(
    rule: str,
    name: str,
    value: object,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    allow_none: bool = False,
) -> float | None:
    if _required(rule, name, value, allow_none):
        return None
    if isinstance(value, bool):
        raise RuleParameterError(rule, name, value, "expected a number")
    try:
        number = float(value.strip() if isinstance(value, str) else value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise RuleParameterError(rule, name, value, "expected a number") from None
    if math.isnan(number):
        raise RuleParameterError(rule, name, value, "expected a number, not NaN")
    if minimum is not None and number < minimum:
        raise RuleParameterError(rule, name, value, f"must be >= {minimum:g}")
    if maximum is not None and number > maximum:
        raise RuleParameterError(rule, name, value, f"must be <= {maximum:g}")
    return number


def parse_int(
    rule: str, name: str, value: object, *, minimum: int | None = None, allow_none: bool = False
) -> int | None:
    if _required(rule, name, value, allow_none):
        return None
    if isinstance(value, bool):
        raise RuleParameterError(rule, name, value, "expected an integer")
    if isinstance(value, int):
        number = value
    else:
        text = value.strip() if isinstance(value, str) else value
        try:
            number = int(text)  # type: ignore[call-overload]
        except (TypeError, ValueError):
            # "10.0" is an integer written by a serializer; "10.5" is not.
            try:
                as_float = float(text)  # type: ignore[arg-type]
            except (TypeError, ValueError):
                raise RuleParameterError(rule, name, value, "expected an integer") from None
            if not as_float.is_integer():
                raise RuleParameterError(rule, name, value, "expected an integer") from None
            number = int(as_float)
    if minimum is not None and number < minimum:
        raise RuleParameterError(rule, name, value, f"must be >= {minimum}")
    return number


def parse_bool(rule: str, name: str, value: object) -> bool:
    """True/true/1/yes and False/false/0/no (what the SageMaker SDK and users write)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE:
        return True
    if isinstance(value, str) and value.strip().lower() in _FALSE:
        return False
    raise RuleParameterError(rule, name, value, "expected True or False")


def parse_str_list(rule: str, name: str, value: object) -> tuple[str, ...]:
    """A comma-separated string or a list of strings; unset → empty tuple. Blanks are dropped."""
    if is_none(value):
        return ()
    if isinstance(value, str):
        items: Iterable[object] = value.split(",")
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = value
    else:
        raise RuleParameterError(rule, name, value, "expected a comma-separated list")
    out: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise RuleParameterError(rule, name, value, "expected a list of strings")
        if item.strip():
            out.append(item.strip())
    return tuple(out)


def parse_mode(rule: str, name: str, value: object) -> ModeKeys | None:
    """A mode name (TRAIN, EVAL, PREDICT, GLOBAL, or smdebug's "ModeKeys.TRAIN"); unset → None."""
    if is_none(value):
        return None
    try:
        return to_mode(value)  # type: ignore[arg-type]
    except (ValueError, TypeError):
        raise RuleParameterError(rule, name, value, "expected one of TRAIN, EVAL, PREDICT, GLOBAL") from None
