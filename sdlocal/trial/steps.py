"""Where a step stands (smdebug's `StepState`), waiting for steps, and smdebug's wait window for
a worker that stays behind. Bookkeeping over a `Trial`'s index; storage access only through
`Trial.refresh` while waiting."""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable
from enum import Enum
from typing import TYPE_CHECKING, Any

from sdlocal.trial.errors import NoMoreData, StepNotYetAvailable, StepUnavailable
from sdlocal.trial.modes import ModeKeys

if TYPE_CHECKING:
    from sdlocal.trial.trial import Trial


class StepState(Enum):
    """What `Trial.has_passed_step` says of a step (smdebug's `smdebug.core.tensor.StepState`)."""

    UNAVAILABLE = 0
    AVAILABLE = 1
    NOT_YET_AVAILABLE = 2


def within_wait_window(steps: list[int], lcs: int | None, window: int) -> int | None:
    """The last complete step once smdebug's wait window is applied to the sorted saved `steps`:
    when more than `window` of them are above `lcs` (incomplete: a worker stopped writing), the
    oldest are taken as complete, half a window at a time. Unlike smdebug, the window counts
    saved steps (smdebug compares a count with a step number, which never triggers when steps
    are saved every N) and is applied at once, not half a window per refresh."""
    first_incomplete = 0 if lcs is None else bisect_right(steps, lcs)
    while len(steps) - first_incomplete > window:
        first_incomplete += window // 2
        lcs = steps[first_incomplete - 1]
    return lcs


def step_state(trial: Trial, step: int, m: ModeKeys | None) -> StepState:
    """AVAILABLE: saved and complete; UNAVAILABLE: not saved, and a later step is complete (or
    training ended); NOT_YET_AVAILABLE otherwise. `m` None: `step` is global. No storage access."""
    g = trial._known_global(m, step)
    if g is not None and g in trial._global_to_mode:
        return StepState.AVAILABLE if trial.is_step_complete(g) else StepState.NOT_YET_AVAILABLE
    steps = trial._sorted_steps(m)
    i = bisect_left(steps, step)
    if i < len(steps):
        later = trial._known_global(m, steps[i])
        if later is not None and trial.last_complete_step >= later:
            return StepState.UNAVAILABLE
        return StepState.NOT_YET_AVAILABLE
    return StepState.UNAVAILABLE if trial.loaded_all_steps else StepState.NOT_YET_AVAILABLE


def wait_for_steps(
    trial: Trial,
    required_steps: Iterable[int],
    mode: Any,
    m: ModeKeys | None,
    *,
    timeout: float,
    interval: float,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
) -> None:
    """Trial.wait_for_steps (its docstring)."""
    deadline = clock() + timeout
    for step in required_steps:
        while True:
            state = step_state(trial, step, m)
            if state is StepState.NOT_YET_AVAILABLE and not trial.loaded_all_steps:
                trial.refresh()  # explicit: waiting refreshes even inside no_refresh
                state = step_state(trial, step, m)
            if state is StepState.AVAILABLE:
                break
            if state is StepState.UNAVAILABLE:
                known = trial._sorted_steps(m)
                last = known[-1] if known else -1
                if trial.loaded_all_steps and step > last:
                    raise NoMoreData(step, mode, last)
                raise StepUnavailable(step, mode)
            if clock() >= deadline:
                raise StepNotYetAvailable(step, mode)
            sleep(interval)
