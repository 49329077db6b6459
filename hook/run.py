"""`python -m hook.run train.py ARGS...`: run an unmodified training script with the hook attached
(see hook._autoattach). Without a hook config file and without an enabled profiler config the
script runs unchanged (as on SageMaker without a DebugHookConfig or ProfilerConfig); with a
profiler config only, the attached hook records the framework timeline (hook._timeline) and saves
no tensor. A bad config of either kind fails before torch is even imported.

When the script ends (or fails), the zero-code hook and the script's own current hook (smdebug's
singleton; hook._current) are closed here, so their last step, collections file and end marker
are written and a write error turns into exit code 1; the framework timeline's files are closed
(their final names) too.
"""
from __future__ import annotations

import logging
import os
import runpy
import signal
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from hook import _current, _timeline
from hook.config import HookConfig
from hook.errors import HookError
from hook.profiler_config import ProfilerConfig
from trial.smdebug_shim import use_sdlocal_smdebug

if TYPE_CHECKING:
    from hook._autoattach import AutoAttach

logger = logging.getLogger(__name__)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print("usage: python -m hook.run SCRIPT [ARGS...]", file=sys.stderr)
        return 2
    script = args[0]
    if not os.path.isfile(script):
        print(f"hook.run: no such script: {script}", file=sys.stderr)
        return 2
    config_path = HookConfig.default_path()
    config: HookConfig | None = None
    if os.path.isfile(config_path):
        try:
            config = HookConfig.from_json_file(config_path)
        except HookError as e:
            print(f"hook.run: bad hook config {config_path}: {e}", file=sys.stderr)
            return 2
    else:
        logger.info("no hook config at %s: no tensors are saved", config_path)
    profiler_path = ProfilerConfig.default_path()
    try:
        profiler = ProfilerConfig.load(profiler_path)
    except HookError as e:
        print(f"hook.run: bad profiler config {profiler_path}: {e}", file=sys.stderr)
        return 2
    if not profiler.enabled:
        logger.info("no enabled profiler config at %s: no framework metrics", profiler_path)
    attach: AutoAttach | None = None
    timeline = _timeline.configure(profiler)
    if config is not None or timeline is not None:
        from hook._autoattach import AutoAttach

        attach = AutoAttach(config)
        attach.install()

    use_sdlocal_smdebug()  # the script's `import smdebug.pytorch` is this hook
    _exit_on_sigterm()
    sys.argv = [script, *args[1:]]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        if e.code not in (None, 0):
            _close_hooks(attach)
            raise
    except BaseException:
        # The script failed (or exited): still write what it saved, then let the error through.
        _close_hooks(attach)
        raise
    return 0 if _close_hooks(attach) else 1


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


def _close_hooks(attach: AutoAttach | None) -> bool:
    """Close the zero-code hook and the script's current hook; False if a write failed."""
    ok = True
    closers = [attach.close] if attach is not None else []
    script_hook = _current.current()
    close = getattr(script_hook, "close", None)
    if script_hook is not None and not script_hook.auto and callable(close):
        closers.append(close)
    for closer in closers:
        try:
            closer()
        except HookError as e:
            print(f"hook.run: {e}", file=sys.stderr)
            ok = False
    _timeline.shutdown()  # closes the last trace file even when no hook was ever attached
    return ok


if __name__ == "__main__":
    raise SystemExit(main())
