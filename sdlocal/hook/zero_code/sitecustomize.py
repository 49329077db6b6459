"""sdlocal's zero-code hook at every Python start of a container-command job (see __init__.py
beside this file), then the next sitecustomize on the path, if any."""
from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys


def _is_training_script(argv0: str) -> bool:
    if not argv0 or argv0.startswith("-") or not argv0.endswith(".py") or not os.path.isfile(argv0):
        return False
    path = os.path.realpath(argv0)
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    if any(path.startswith(prefix + os.sep) for prefix in prefixes):
        return False
    return f"{os.sep}input{os.sep}data{os.sep}sm_drivers{os.sep}" not in path


def _attach() -> None:
    if not os.environ.get("TRAINING_JOB_NAME") or os.environ.get("SDLOCAL_ZERO_CODE_ATTACHED"):
        return
    if not _is_training_script(sys.argv[0] if sys.argv else ""):
        return
    os.environ["SDLOCAL_ZERO_CODE_ATTACHED"] = "1"  # not again in a process this one starts as itself
    try:
        from sdlocal.hook.run import attach_at_startup
    except ImportError as e:
        print(f"sdlocal: the zero-code hook is not in this Python ({e}): no tensors are saved", file=sys.stderr)
        return
    attach_at_startup()


def _chain() -> None:
    """Run the sitecustomize that ours shadows (the next one on sys.path)."""
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None or spec.origin == os.path.abspath(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


_attach()
_chain()
