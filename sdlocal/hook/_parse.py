"""Primitive value parsers for hook configs: SageMaker passes every value as a string."""
from __future__ import annotations

import re
from typing import Any

from sdlocal.hook.errors import HookConfigError


def parse_str_list(value: Any, fieldname: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(p.strip() for p in value.split(",") if p.strip())
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(v.strip() for v in value if v.strip())
    raise HookConfigError(fieldname, f"expected a comma-separated string or a list of strings, got {value!r}")


def parse_regexes(value: Any, fieldname: str) -> tuple[str, ...]:
    regexes = parse_str_list(value, fieldname)
    for rx in regexes:
        try:
            re.compile(rx)
        except re.error as e:
            raise HookConfigError(fieldname, f"invalid regular expression {rx!r}: {e}") from e
    return regexes


def parse_steps(value: Any, fieldname: str) -> tuple[int, ...]:
    if isinstance(value, str):
        items: list[Any] = [p.strip() for p in value.split(",") if p.strip()]
    elif isinstance(value, list):
        items = list(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        items = [value]
    else:
        raise HookConfigError(fieldname, f"expected steps like \"1,2,3\" or a list of integers, got {value!r}")
    return tuple(sorted({parse_int(v, fieldname, minimum=0) for v in items}))


def parse_int(value: Any, fieldname: str, *, minimum: int) -> int:
    if isinstance(value, bool):
        raise HookConfigError(fieldname, f"expected an integer, got {value!r}")
    if isinstance(value, int):
        out = value
    elif isinstance(value, float) and value.is_integer():
        out = int(value)
    elif isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
        out = int(value)
    else:
        raise HookConfigError(fieldname, f"expected an integer, got {value!r}")
    if out < minimum:
        raise HookConfigError(fieldname, f"must be >= {minimum}, got {out}")
    return out


def parse_bool(value: Any, default: bool, fieldname: str) -> bool:
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise HookConfigError(fieldname, f"expected true or false, got {value!r}")


def is_none(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "null"))
