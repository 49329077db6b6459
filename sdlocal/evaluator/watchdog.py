"""The rule timeout (`--rule-timeout`): a custom rule that never returns is stopped.

What it measures: the time the RULE'S OWN CODE runs without returning, one call at a time: the
import of a custom rule file, the rule's constructor, and each `invoke_at_step(step)` (one step's
evaluation), `invoke_at_end()` and `invoke_idle()`. Waiting for the training's data, S3 reads and
retries, and the time between steps are not counted: a slow training or an S3 outage is not a
hung rule. Default 300 s (`DEFAULT_RULE_TIMEOUT_S`): a step's check takes milliseconds for the
built-in rules and rarely a minute for a heavy custom one.

A thread of the evaluator process watches the running call. Past half the limit (at most 30 s)
and then every 30 s it says so on the evaluator's stderr, prefixed `PREFIX`; `sdlocal run` and
`sdlocal evaluate` relay those lines:

    sdlocal-watchdog: Rule MyRule: step 12 has been evaluating for 30 s (limit 60 s)

At the limit it calls `on_expired(details)` (the evaluator's entry points write the rule's `Error`
status with these details, then leave with `os._exit`: the hung call cannot be interrupted safely).

One evaluator process runs one rule: the watchdog is installed per process (`install`), and the
evaluator's code marks its phases with the module-level `phase()` / `importing()` / `guard()`,
which do nothing where no watchdog is installed (a notebook calling `evaluate_trial`).
The import of a custom rule file is also marked in the log (`IMPORT_STARTED`, `IMPORT_DONE`):
a supervisor reading the log of an evaluator that died tells "exited during the import".
"""
from __future__ import annotations

import contextlib
import functools
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TextIO

DEFAULT_RULE_TIMEOUT_S = 300.0
PREFIX = "sdlocal-watchdog: "
IMPORT_STARTED = "importing custom rule file"
IMPORT_DONE = "imported custom rule file"
_WARN_EVERY_S = 30.0
_GUARDED = ("invoke_at_step", "invoke_at_window", "invoke_at_end", "invoke_idle")

log = logging.getLogger("sdlocal.evaluator.watchdog")


def check_timeout(value: float, name: str = "--rule-timeout") -> float:
    if not value > 0:  # also refuses NaN; inf: no limit
        raise ValueError(f"{name} must be a number of seconds > 0, not {value!r}")
    return float(value)


class RuleWatchdog:
    """Watches one rule's calls (`phase`); `on_expired(details)` once a call runs past `limit_s`."""

    def __init__(self, rule_name: str, limit_s: float, *, on_expired: Callable[[str], None],
                 say: Callable[[str], None], clock: Callable[[], float] = time.monotonic,
                 tick_s: float = 0.5) -> None:
        self.rule_name = rule_name
        self.limit_s = check_timeout(limit_s)
        self.on_expired = on_expired
        self.say = say
        self.clock = clock
        self.tick_s = tick_s
        self.warn_every_s = min(_WARN_EVERY_S, self.limit_s / 2)
        self._lock = threading.Lock()
        self._current: tuple[str, str, float] | None = None  # (what, verb, started)
        self._next_warning = 0.0
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sdlocal-rule-watchdog", daemon=True)
        self.expired: str | None = None  # the details, once expired

    def start(self) -> RuleWatchdog:
        self._thread.start()
        return self

    def close(self) -> None:
        self._closed.set()
        if self._thread.ident is not None and self._thread is not threading.current_thread():
            self._thread.join(5.0)

    @contextlib.contextmanager
    def phase(self, what: str, verb: str = "has been running") -> Iterator[None]:
        """Time the block as one call of the rule's code (a nested phase counts as its outer one)."""
        with self._lock:
            if self._current is not None:
                outer = True
            else:
                outer = False
                self._current = (what, verb, self.clock())
                self._next_warning = self.warn_every_s
        try:
            yield
        finally:
            if not outer:
                with self._lock:
                    self._current = None

    def check(self) -> None:
        """One look: a note past each warning mark, `on_expired` past the limit (the thread's tick)."""
        with self._lock:
            if self._current is None or self.expired is not None:
                return
            what, verb, started = self._current
            elapsed = self.clock() - started
            if elapsed < self.limit_s:
                if elapsed < self._next_warning:
                    return
                self._next_warning += self.warn_every_s
                note = f"Rule {self.rule_name}: {what} {verb} for {elapsed:.0f} s (limit {self.limit_s:g} s)"
                expired = None
            else:
                note = expired = (f"Rule {self.rule_name}: {what} did not return within the rule timeout of "
                                  f"{self.limit_s:g} s (--rule-timeout): the evaluator was stopped")
                self.expired = expired
        self.say(PREFIX + note)
        if expired is not None:
            self.on_expired(expired)

    def _run(self) -> None:
        while not self._closed.wait(self.tick_s):
            self.check()

    def guard(self, rule: Any) -> Any:
        """`rule` with its judgement methods timed (instance attributes over the class's methods)."""
        for name in _GUARDED:
            method = getattr(rule, name, None)
            if callable(method):
                setattr(rule, name, self._timed(name, method))
        return rule

    def _timed(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def call(*args: Any, **kwargs: Any) -> Any:
            if name == "invoke_at_step":
                step = args[0] if args else kwargs.get("step")
                what, verb = f"step {step}", "has been evaluating"
            else:
                what, verb = f"{name}()", "has been running"
            with self.phase(what, verb):
                return method(*args, **kwargs)

        return call


_installed: RuleWatchdog | None = None


def install(watchdog: RuleWatchdog | None) -> RuleWatchdog | None:
    """Make `watchdog` (started) the one of this process; None uninstalls. Returns the previous one."""
    global _installed
    previous, _installed = _installed, watchdog
    if watchdog is not None and watchdog._thread.ident is None:
        watchdog.start()
    return previous


def installed() -> RuleWatchdog | None:
    return _installed


def phase(what: str, verb: str = "has been running") -> contextlib.AbstractContextManager[None]:
    return _installed.phase(what, verb) if _installed is not None else contextlib.nullcontext()


@contextlib.contextmanager
def importing(path: Any) -> Iterator[None]:
    """The import of a custom rule file: timed, and marked in the log before and after."""
    log.info("%s %s", IMPORT_STARTED, path)
    with phase(f"the import of custom rule file {path}"):
        yield
    log.info("%s %s", IMPORT_DONE, path)


def guard(rule: Any) -> Any:
    return _installed.guard(rule) if _installed is not None else rule


def exit_after_status(writing: threading.Lock, write: Callable[[], None], stderr: TextIO, code: int = 1) -> None:
    """The end of an evaluator whose rule timed out: write its final status (waiting at most 30 s
    for a status write under way, `writing`), then leave the process at once, whatever its other
    threads do (`os._exit`: the hung call keeps its thread, which nothing can interrupt)."""
    try:
        if writing.acquire(timeout=30.0):
            write()
    except Exception as exc:  # noqa: BLE001 - the supervisor reads the line said before instead
        print(f"evaluator: cannot write the status: {type(exc).__name__}: {exc}", file=stderr)
    finally:
        with contextlib.suppress(Exception):
            stderr.flush()
            sys.stdout.flush()
        os._exit(code)
