"""Training modes, with smdebug's names and integer values (the events file stores the integer,
the index file stores the name)."""
from __future__ import annotations

from enum import IntEnum


class ModeKeys(IntEnum):
    TRAIN = 1
    EVAL = 2
    PREDICT = 3
    GLOBAL = 4


def to_mode(value: ModeKeys | int | str) -> ModeKeys:
    """Accept a ModeKeys, its integer value, its name ("TRAIN") or smdebug's str ("ModeKeys.TRAIN")."""
    if isinstance(value, ModeKeys):
        return value
    if isinstance(value, str):
        name = value.rsplit(".", 1)[-1].strip().upper()
        if name.isdigit():
            return ModeKeys(int(name))
        try:
            return ModeKeys[name]
        except KeyError:
            raise ValueError(f"unknown mode {value!r}") from None
    return ModeKeys(int(value))
