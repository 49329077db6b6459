"""smdebug.analysis.utils: `no_refresh` / `refresh` (trial/refresh.py) and smdebug's small
parsing helpers for rule parameters."""
from __future__ import annotations

from typing import Any

from sdlocal.trial.refresh import no_refresh, refresh


def parse_list_from_str(arg: Any, delimiter: str = ",") -> list[Any]:
    """A list from a `delimiter`-separated string (or a list as it is; None or "" is empty)."""
    if arg is None or arg == "":
        return []
    if isinstance(arg, str):
        return arg.split(delimiter)
    if isinstance(arg, list):
        return arg
    raise ValueError(f"expected a string or a list, got {arg!r}")


def parse_bool(arg: Any, default: bool) -> bool:
    """True/False from a bool or from "True"/"true"/"False"/"false"; None gives `default`."""
    if arg is None:
        return default
    if arg is True or arg is False:
        return bool(arg)
    if arg in ("True", "true"):
        return True
    if arg in ("False", "false"):
        return False
    raise ValueError(f"boolean argument expected, but found {arg}")


__all__ = ["no_refresh", "parse_bool", "parse_list_from_str", "refresh"]
