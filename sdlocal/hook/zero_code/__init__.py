"""The zero-code hook in scripts that sdlocal does not start itself.

A script-mode job runs `python -m sdlocal.hook.run train.py`. A container command (the request's
ContainerEntrypoint, e.g. the SDK v3 ModelTrainer's `sm_train.sh`) starts its Python processes
itself: its drivers run `python train.py`. This folder is put first on such a job's PYTHONPATH,
and its `sitecustomize.py` (Python imports it at every start) attaches the same zero-code hook
(`sdlocal.hook.run.attach_at_startup`) in the processes that run a training script:

- only in a training job whose DebugHookConfig or enabled ProfilerConfig is there (else nothing);
- only in a process whose main program is a script file (`python train.py ...`), not `-c`/`-m`
  (pip, torchrun's launcher), not a script installed under the interpreter's prefix, and not
  one of the SDK's own drivers (the `sm_drivers` channel: they set up the environment and start
  the user's script, training nothing themselves);
- once per process; the hooks are closed (last step, collections, end marker) when it exits.

Why sitecustomize rather than rewriting the command: the drivers build the `python train.py`
command themselves, at run time, from files of theirs; an interpreter start hook sees every
Python process the job starts whatever starts it, and needs no change to the user's code or the
SDK's. A sitecustomize already on the path (Debian's python3 has one) still runs after ours.
"""
from __future__ import annotations

from pathlib import Path

DRIVERS_CHANNEL = "sm_drivers"


def site_dir() -> Path:
    """The folder to put first on PYTHONPATH: this one (it holds sitecustomize.py)."""
    return Path(__file__).resolve().parent
