"""smdebug.profiler.python_profile_utils, as the profiling notebooks import it: the same names and
values as smdebug 1.0 (checked against the real smdebug where its side virtualenv is here)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from smdebug.core.modes import ModeKeys as SmdModeKeys
from smdebug.profiler.python_profile_utils import (
    PythonProfileModes,
    PythonProfilerName,
    StepPhase,
    cProfileTimer,
    cpu_time,
    mode_keys_to_python_profile_mode,
    off_cpu_time,
    python_profile_mode_to_str,
    str_to_python_profile_mode,
    total_time,
)

from sdlocal.trial.modes import ModeKeys

NAMES = ("PythonProfileModes", "StepPhase", "PythonProfilerName", "cProfileTimer")


def _ours() -> dict[str, dict[str, object]]:
    import smdebug.profiler.python_profile_utils as utils

    return {name: {m.name: m.value for m in getattr(utils, name)} for name in NAMES}


def test_modes_and_phases_round_trip() -> None:
    for mode in PythonProfileModes:
        assert str_to_python_profile_mode(python_profile_mode_to_str(mode)) is mode
    assert python_profile_mode_to_str(PythonProfileModes.PRE_STEP_ZERO) == "prestepzero"
    assert mode_keys_to_python_profile_mode(ModeKeys.EVAL) is PythonProfileModes.EVAL
    assert mode_keys_to_python_profile_mode(SmdModeKeys.TRAIN) is PythonProfileModes.TRAIN
    assert StepPhase("forwardpassend") is StepPhase.FORWARD_PASS_END
    assert PythonProfilerName.CPROFILE.value == "cprofile" and cProfileTimer("off_cpu_time") is cProfileTimer.OFF_CPU_TIME
    with pytest.raises(ValueError, match="Invalid mode 'training'"):
        str_to_python_profile_mode("training")
    busy = sum(i * i for i in range(200_000))
    assert busy > 0 and total_time() > 0 and cpu_time() > 0
    assert off_cpu_time() == pytest.approx(total_time() - cpu_time(), abs=0.05)


@pytest.mark.interop
def test_same_names_and_values_as_the_real_smdebug(smdebug_python: Path) -> None:
    read = ("import json\nimport smdebug.profiler.python_profile_utils as u\n"
            f"print(json.dumps({{n: {{m.name: m.value for m in getattr(u, n)}} for n in {NAMES!r}}}))\n")
    proc = subprocess.run([str(smdebug_python), "-c", read], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == json.loads(json.dumps(_ours()))
