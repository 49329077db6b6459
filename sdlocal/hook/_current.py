"""One hook per job: the process's current hook (smdebug's hook singleton) and which hook writes
to which directory.

- Every hook makes itself the current hook when it is created. When the current hook is the
  zero-code hook of `python -m sdlocal.hook.run` (`auto=True`) and the script then creates its own hook,
  the zero-code hook hands over to it (`Hook._hand_over_to`): it stops, writes what it has, and
  the script's hook takes over (continuing its step count when both write to one folder).
  `sdlocal.hook._autoattach` never attaches once a hook exists.
- A directory is written by one hook at a time: the first hook to write there claims it until it
  is closed; another hook of this process writing to the same directory writes nothing (as
  smdebug, whose first writing process claims the folder). Two writers would race on the same
  `.tmp` files and overwrite each other's steps.

No torch here: `sdlocal.hook.run` asks for the current hook whether or not the script imported torch.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Protocol

logger = logging.getLogger(__name__)


class _Hook(Protocol):
    auto: bool

    @property
    def closed(self) -> bool: ...

    def _hand_over_to(self, new: Any) -> None: ...


_current: _Hook | None = None
_writers: dict[str, _Hook] = {}
_script_hooks = [0]  # hooks created that are not the zero-code hook


def current() -> _Hook | None:
    """The hook created last in this process (the zero-code hook included), or None."""
    return _current


def script_hooks_created() -> int:
    """How many hooks other than the zero-code hook this process has created so far."""
    return _script_hooks[0]


def install(hook: _Hook) -> None:
    """Make `hook` the current hook; an open zero-code hook hands over to it first."""
    global _current
    if not hook.auto:
        _script_hooks[0] += 1
    previous = _current
    if previous is not None and previous is not hook and previous.auto and not previous.closed \
            and not hook.auto:
        previous._hand_over_to(hook)
    _current = hook


def set_current(hook: _Hook | None) -> None:
    """smdebug's set_hook / del_hook: replace the current hook without a hand-over."""
    global _current
    _current = hook


def _key(path: str | os.PathLike[str]) -> str:
    return str(Path(path).expanduser().resolve())


def claim(path: str | os.PathLike[str], hook: _Hook) -> bool:
    """True if `hook` may write to `path`: nobody else holds it, or its holder is closed."""
    key = _key(path)
    holder = _writers.get(key)
    if holder is not None and holder is not hook and not holder.closed:
        return False
    _writers[key] = hook
    return True


def release(path: str | os.PathLike[str], hook: _Hook) -> None:
    key = _key(path)
    if _writers.get(key) is hook:
        del _writers[key]


def same_dir(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    return _key(a) == _key(b)
