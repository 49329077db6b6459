"""Training modes, with smdebug's names and integer values (the events file stores the integer,
the index file stores the name)."""
from __future__ import annotations

import operator
from enum import Enum, IntEnum


class ModeKeys(IntEnum):
    TRAIN = 1
    EVAL = 2
    PREDICT = 3
    GLOBAL = 4


def to_mode(value: object) -> ModeKeys:
    """Accept a ModeKeys, any other Enum member named TRAIN/EVAL/PREDICT/GLOBAL (the real smdebug's
    `smdebug.modes` included), its integer value, its name ("TRAIN") or smdebug's str
    ("ModeKeys.TRAIN")."""
    if isinstance(value, ModeKeys):
        return value
    if isinstance(value, Enum):  # by name, not value: a foreign enum's values are its own business
        try:
            return ModeKeys[value.name]
        except KeyError:
            raise ValueError(f"unknown mode {value!r}: expected TRAIN, EVAL, PREDICT or GLOBAL") from None
    if isinstance(value, str):
        name = value.rsplit(".", 1)[-1].strip().upper()
        if name.isdigit():
            return ModeKeys(int(name))
        try:
            return ModeKeys[name]
        except KeyError:
            raise ValueError(f"unknown mode {value!r}") from None
    if not isinstance(value, bool):
        try:
            return ModeKeys(operator.index(value))  # type: ignore[arg-type]
        except TypeError:
            pass
    raise ValueError(f"unknown mode {value!r}: expected a ModeKeys, its name or its value")
