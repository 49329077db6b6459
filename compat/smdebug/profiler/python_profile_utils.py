"""smdebug.profiler.python_profile_utils: the names the profiling notebooks and smdebug's Python
profiling docs import (`PythonProfileModes`, `StepPhase`, the mode <-> string helpers, the
cProfile timers), with smdebug 1.0's values. sdlocal does not run cProfile/pyinstrument itself:
these are the vocabulary of code that reads or configures such profiles."""
from __future__ import annotations

import enum
import os
from typing import Any

CPROFILE_NAME = "cprofile"
PYINSTRUMENT_NAME = "pyinstrument"


class PythonProfileModes(enum.IntEnum):
    """smdebug's ModeKeys plus the two phases outside the steps."""

    TRAIN = 1
    EVAL = 2
    PREDICT = 3
    GLOBAL = 4
    PRE_STEP_ZERO = 5  # from the hook's import to the first step
    POST_HOOK_CLOSE = 6  # after the hook closed


class StepPhase(enum.Enum):
    START = "start"  # before step zero
    STEP_START = "stepstart"
    FORWARD_PASS_END = "forwardpassend"
    STEP_END = "stepend"
    END = "end"  # the end of the script


class PythonProfilerName(enum.Enum):
    CPROFILE = CPROFILE_NAME
    PYINSTRUMENT = PYINSTRUMENT_NAME


class cProfileTimer(enum.Enum):  # noqa: N801 - smdebug's name
    TOTAL_TIME = "total_time"
    CPU_TIME = "cpu_time"
    OFF_CPU_TIME = "off_cpu_time"
    DEFAULT = "default"


_MODE_NAMES = {
    PythonProfileModes.TRAIN: "train",
    PythonProfileModes.EVAL: "eval",
    PythonProfileModes.PREDICT: "predict",
    PythonProfileModes.GLOBAL: "global",
    PythonProfileModes.PRE_STEP_ZERO: "prestepzero",
    PythonProfileModes.POST_HOOK_CLOSE: "posthookclose",
}
_MODES_BY_NAME = {name: mode for mode, name in _MODE_NAMES.items()}


def str_to_python_profile_mode(mode_str: str) -> PythonProfileModes:
    """"train" -> PythonProfileModes.TRAIN, ... ("prestepzero", "posthookclose"); any other is an error."""
    try:
        return _MODES_BY_NAME[mode_str]
    except (KeyError, TypeError):
        raise ValueError(f"Invalid mode {mode_str!r} (known: {', '.join(_MODES_BY_NAME)})") from None


def python_profile_mode_to_str(mode: Any) -> str:
    """PythonProfileModes.TRAIN -> "train", ...; the inverse of `str_to_python_profile_mode`."""
    try:
        return _MODE_NAMES[PythonProfileModes(mode)]
    except (KeyError, ValueError, TypeError):
        raise ValueError(f"Invalid mode {mode!r}") from None


def mode_keys_to_python_profile_mode(mode: Any) -> PythonProfileModes:
    """A hook's ModeKeys (smdebug's or sdlocal's: TRAIN=1 ... GLOBAL=4) as a PythonProfileModes."""
    return PythonProfileModes(int(getattr(mode, "value", mode)))


def total_time() -> float:
    """Seconds of wall time since an arbitrary point (os.times().elapsed)."""
    return os.times().elapsed


def cpu_time() -> float:
    """CPU seconds of this process (user + system)."""
    times = os.times()
    return times.user + times.system


def off_cpu_time() -> float:
    """Wall seconds not spent on the CPU: `total_time() - cpu_time()`."""
    times = os.times()
    return times.elapsed - (times.user + times.system)
