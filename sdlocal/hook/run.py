"""`python -m sdlocal.hook.run train.py ARGS...`: run an unmodified training script with the hook attached
(see hook._autoattach). Without a hook config file and without an enabled profiler config the
script runs unchanged (as on SageMaker without a DebugHookConfig or ProfilerConfig); with a
profiler config only, the attached hook records the framework timeline (hook._timeline) and saves
no tensor. A bad config of either kind fails before torch is even imported.

In a training job whose code directory (the working directory) holds a requirements.txt, it is
first installed into the job's own environment and this re-executes itself with that
environment's interpreter (hook._requirements); a failed install fails the training.

When the script ends (or fails), the zero-code hook and the script's own current hook (smdebug's
singleton; hook._current) are closed here, so their last step, collections file and end marker
are written and a write error turns into exit code 1; the framework timeline's files are closed
(their final names) too.
"""
from __future__ import annotations

import atexit
import importlib.util
import logging
import os
import runpy
import signal
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from sdlocal.hook import _current, _requirements, _timeline
from sdlocal.hook.config import HookConfig
from sdlocal.hook.errors import HookError
from sdlocal.hook.profiler_config import ProfilerConfig
from sdlocal.trial.smdebug_shim import use_sdlocal_smdebug

if TYPE_CHECKING:
    from sdlocal.hook._autoattach import AutoAttach
    from sdlocal.hook._xgb_autoattach import XGBoostAttach

logger = logging.getLogger(__name__)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print("usage: python -m sdlocal.hook.run SCRIPT [ARGS...]", file=sys.stderr)
        return 2
    script = args[0]
    if not os.path.isfile(script):
        print(f"sdlocal.hook.run: no such script: {script}", file=sys.stderr)
        return 2
    # the code directory's requirements.txt, into the job's environment (re-executes this in it)
    failed = _requirements.prepare(args)
    if failed is not None:
        return failed
    attached = attach()
    if isinstance(attached, int):
        return attached
    closers = attached
    sys.argv = [script, *args[1:]]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        if e.code not in (None, 0):
            _close_hooks(closers)
            raise
    except BaseException:
        # The script failed (or exited): still write what it saved, then let the error through.
        _close_hooks(closers)
        raise
    return 0 if _close_hooks(closers) else 1


def attach() -> list[Callable[[], None]] | int:
    """The zero-code hooks of this job attached to this process (torch's where torch is installed,
    xgboost's when it is imported), `import smdebug` made sdlocal's and SIGTERM made an exit; their
    closers, or the exit code 2 after a line saying which config is bad."""
    config_path = HookConfig.default_path()
    config: HookConfig | None = None
    xgb_config: HookConfig | None = None
    if os.path.isfile(config_path):
        # One file, read for either framework's collections: a config that only one of them
        # accepts (an XGBoost job's `trees`, a PyTorch job's custom collections) serves that one.
        errors: list[HookError] = []
        for framework in ("pytorch", "xgboost"):
            try:
                parsed = HookConfig.from_json_file(config_path, framework=framework)
            except HookError as e:
                errors.append(e)
                continue
            if framework == "pytorch":
                config = parsed
            else:
                xgb_config = parsed
        if config is None and xgb_config is None:
            print(f"sdlocal.hook.run: bad hook config {config_path}: {errors[0]}", file=sys.stderr)
            return 2
    else:
        logger.info("no hook config at %s: no tensors are saved", config_path)
    profiler_path = ProfilerConfig.default_path()
    try:
        profiler = ProfilerConfig.load(profiler_path)
    except HookError as e:
        print(f"sdlocal.hook.run: bad profiler config {profiler_path}: {e}", file=sys.stderr)
        return 2
    if not profiler.enabled:
        logger.info("no enabled profiler config at %s: no framework metrics", profiler_path)
    attacher: AutoAttach | None = None
    xgb_attach: XGBoostAttach | None = None
    timeline = _timeline.configure(profiler)
    # torch only where installed (an XGBoost image has none); xgboost is patched when imported
    if (config is not None or timeline is not None) and importlib.util.find_spec("torch") is not None:
        from sdlocal.hook._autoattach import AutoAttach

        attacher = AutoAttach(config)
        attacher.install()
    if xgb_config is not None and importlib.util.find_spec("xgboost") is not None:
        from sdlocal.hook._xgb_autoattach import XGBoostAttach

        xgb_attach = XGBoostAttach(xgb_config)
        xgb_attach.install()
    use_sdlocal_smdebug()  # the script's `import smdebug.pytorch` is this hook
    _exit_on_sigterm()
    return [a.close for a in (xgb_attach, attacher) if a is not None]


def attach_at_startup() -> None:
    """For hook/zero_code/sitecustomize.py: `attach()` in a process that Python itself runs the
    script of (a container command's `python train.py`); the hooks closed when it exits."""
    attached = attach()
    if isinstance(attached, int):  # a bad config, said: the training fails as under hook.run
        sys.stderr.flush()
        os._exit(attached)  # SystemExit would be a fatal error of the interpreter's start
    atexit.register(_close_hooks, attached)


def _exit_on_sigterm() -> None:
    """SIGTERM (how a job is stopped: Ctrl-C, `sdlocal stop`, a rule's StopTraining, the maximum
    runtime) raises SystemExit(143) in the script, so the hooks below still write their last step,
    collections and end marker and the timeline's open file gets its final name; Python's default
    would end the process at once and leave those as .tmp files that are never uploaded. A script
    that installs its own SIGTERM handler replaces this one, as on SageMaker."""
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _raise_exit)


def _raise_exit(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def _close_hooks(attached: list[Callable[[], None]]) -> bool:
    """Close the zero-code hooks and the script's current hook; False if a write failed."""
    ok = True
    closers = list(attached)
    script_hook = _current.current()
    close = getattr(script_hook, "close", None)
    if script_hook is not None and not script_hook.auto and callable(close):
        closers.append(close)
    for closer in closers:
        try:
            closer()
        except HookError as e:
            print(f"sdlocal.hook.run: {e}", file=sys.stderr)
            ok = False
    _timeline.shutdown()  # closes the last trace file even when no hook was ever attached
    return ok


if __name__ == "__main__":
    raise SystemExit(main())
