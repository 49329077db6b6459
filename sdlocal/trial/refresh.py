"""Turning a trial's implicit refresh off and on for a block (`smdebug.analysis.utils.no_refresh`
/ `refresh`).

A trial refreshes by itself (`Trial.maybe_refresh`) when asked about steps, tensor names or a
tensor or step it does not know yet, unless its `dynamic_refresh` is False or training has
ended and every step is loaded. `no_refresh(trials)` freezes what the block sees: a rule
judging a step looks at the same data from its first read to its last.

Deliberate difference from smdebug: on leaving the block each trial gets back the value it had
before (smdebug sets True, resp. False, whatever it was, and skips that when the block raises),
so the blocks nest and an exception does not leave a trial frozen.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, TypeVar

T = TypeVar("T")


def _as_list(trials: Any) -> list[Any]:
    return list(trials) if isinstance(trials, (list, tuple)) else [trials]


@contextlib.contextmanager
def _dynamic_refresh(trials: T, value: bool) -> Iterator[T]:
    targets = _as_list(trials)
    saved = [getattr(t, "dynamic_refresh", True) for t in targets]
    for t in targets:
        t.dynamic_refresh = value
    try:
        yield trials
    finally:
        for t, before in zip(targets, saved, strict=True):
            t.dynamic_refresh = before


def no_refresh(trials: T) -> contextlib.AbstractContextManager[T]:
    """Within the block, `trials` (one trial or a list) do not refresh by themselves; yields them."""
    return _dynamic_refresh(trials, False)


def refresh(trials: T) -> contextlib.AbstractContextManager[T]:
    """Within the block, `trials` refresh by themselves again (inside a `no_refresh` block)."""
    return _dynamic_refresh(trials, True)
