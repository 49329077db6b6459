"""smdebug.profiler.utils: str2bool (rules parse their string parameters with it)."""
from __future__ import annotations

_TRUE = frozenset({"y", "yes", "t", "true", "on", "1"})
_FALSE = frozenset({"n", "no", "f", "false", "off", "0"})


def str2bool(v: object) -> bool:
    """True/False from a bool or from the strings distutils' strtobool knew (ValueError otherwise)."""
    if isinstance(v, bool):
        return v
    text = str(v).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"invalid truth value {v!r}")


__all__ = ["str2bool"]
