"""How S3Storage rides through an S3 outage: one retry policy for every S3 call of sdlocal (the
launcher's uploads and checks, the evaluators' reads and status writes).

A call that fails with a transient error (connection refused or reset, a timeout, a 5xx answer,
throttling) is tried again after a growing pause (0.2 s, doubling, at most 5 s, with jitter) until
it succeeds or `RetryPolicy.total_s` (120 s by default, `SDLOCAL_S3_RETRY_S`) has passed since its
first try; then it fails with StorageError. Errors that another try cannot fix (403, a bad request,
bad credentials, a TLS failure) fail at once; a missing key is not an error of the endpoint.

A missing bucket is special: a bucket that this process saw answer before and that is gone now is
an endpoint that restarted empty (a moto without persistence); it is waited for like an outage
(the launcher re-creates it: `Retry.recreate_bucket`). A bucket never seen is a wrong name and
fails at once.

The outage is said once per endpoint and process (`report`), not per retry: when the first call
starts waiting and when a call gets through again. Clock, sleep and the random jitter are
injected; `Retry.cancel` (an Event) makes a waiting call give up (the launcher's Ctrl-C).
"""
from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sdlocal.trial.errors import one_line

T = TypeVar("T")

RETRY_ENV = "SDLOCAL_S3_RETRY_S"
DEFAULT_TOTAL_S = 120.0
# A frozen endpoint (accepts connections, never answers) must not hang a call forever: botocore's
# defaults are a 60 s connect and 60 s read timeout, each try. Reads of moto's largest answers
# (a 1,000-key LIST, a 128 MiB GET) start well within this.
CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 20.0

log = logging.getLogger("sdlocal.trial.storage")

RETRY = "retry"
MISSING_BUCKET = "missing-bucket"
FATAL = "fatal"

_THROTTLING = frozenset({
    "Throttling", "ThrottlingException", "ThrottledException", "SlowDown", "RequestLimitExceeded",
    "TooManyRequestsException", "RequestThrottled", "RequestThrottledException", "ProvisionedThroughputExceededException",
    "RequestTimeout", "RequestTimeoutException", "InternalError", "ServiceUnavailable", "PriorRequestNotComplete",
})


@dataclass(frozen=True)
class RetryPolicy:
    total_s: float = DEFAULT_TOTAL_S  # a call gives up this long after its first try (0: no retry)
    first_delay_s: float = 0.2
    max_delay_s: float = 5.0
    multiplier: float = 2.0
    jitter: float = 0.25  # each pause is shortened by up to this fraction (tries of many callers spread)

    def __post_init__(self) -> None:
        if not (self.total_s >= 0 and self.first_delay_s > 0 and self.max_delay_s >= self.first_delay_s
                and self.multiplier >= 1 and 0 <= self.jitter < 1):
            raise ValueError(f"invalid retry policy {self}")

    def delay(self, attempt: int, rand: float) -> float:
        """The pause after failed try number `attempt` (1-based); `rand` in [0, 1)."""
        base = min(self.max_delay_s, self.first_delay_s * self.multiplier ** (attempt - 1))
        return base * (1 - self.jitter * rand)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> RetryPolicy:
        env = os.environ if environ is None else environ
        raw = (env.get(RETRY_ENV) or "").strip()
        if not raw:
            return cls()
        try:
            total = float(raw)
        except ValueError:
            raise ValueError(f"{RETRY_ENV} must be a number of seconds, not {raw!r}") from None
        if not total >= 0:
            raise ValueError(f"{RETRY_ENV} must be >= 0, not {raw!r}")
        return cls(total_s=total)


def error_code(err: BaseException) -> tuple[str, int | None]:
    response = getattr(err, "response", None) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return code, status if isinstance(status, int) else None


def _botocore_classes() -> tuple[tuple[type, ...], tuple[type, ...]]:
    """(transient, never transient) botocore/urllib3 error classes, looked up once."""
    import botocore.exceptions as be

    transient: list[type] = [ConnectionError, TimeoutError]  # builtins: reset, refused, socket timeouts
    for name in ("HTTPClientError", "ConnectionError", "IncompleteReadError"):
        cls = getattr(be, name, None)
        if cls is not None:
            transient.append(cls)
    try:
        import urllib3.exceptions as ue

        transient += [ue.ProtocolError, ue.TimeoutError]
    except ImportError:  # pragma: no cover - botocore depends on urllib3
        pass
    never = tuple(c for c in (getattr(be, "SSLError", None),) if c is not None)
    return tuple(transient), never


_CLASSES: tuple[tuple[type, ...], tuple[type, ...]] | None = None


def classify(err: BaseException) -> str:
    """RETRY (transient), MISSING_BUCKET or FATAL. Wrapped errors (boto3's S3UploadFailedError,
    s3transfer's) are judged by the error they wrap."""
    global _CLASSES
    if _CLASSES is None:
        _CLASSES = _botocore_classes()
    transient, never = _CLASSES
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, never):
            return FATAL
        code, status = error_code(current)
        if code == "NoSuchBucket":
            return MISSING_BUCKET
        if code or status:
            if code in _THROTTLING or (status is not None and (status >= 500 or status == 429)):
                return RETRY
            return FATAL
        if isinstance(current, transient):
            return RETRY
        current = current.__cause__ or current.__context__
    return FATAL


def client_config(**overrides: Any) -> Any:
    """botocore Config of the clients sdlocal makes: bounded connect/read timeouts, and no retries
    of botocore's own (the policy above is the one place; botocore would multiply its tries)."""
    from botocore.config import Config

    kwargs: dict[str, Any] = {"connect_timeout": CONNECT_TIMEOUT_S, "read_timeout": READ_TIMEOUT_S,
                              "retries": {"total_max_attempts": 1, "mode": "standard"}}
    kwargs.update(overrides)
    return Config(**kwargs)


class _Outages:
    """What was said about each endpoint: one line when an outage starts, one when it ends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._since: dict[str, float] = {}
        self.listeners: list[Callable[[str], None]] = []

    def _say(self, message: str) -> None:
        if self.listeners:
            for listener in list(self.listeners):
                listener(message)
        else:
            log.warning("%s", message)

    def failing(self, endpoint: str, err: BaseException, policy: RetryPolicy, now: float) -> None:
        with self._lock:
            if endpoint in self._since:
                return
            self._since[endpoint] = now
        self._say(f"S3 at {endpoint} does not answer ({one_line(err, 300)}); retrying for up to {policy.total_s:g} s")

    def answered(self, endpoint: str, clock: Callable[[], float]) -> None:
        if endpoint not in self._since:  # the common case, without the lock
            return
        with self._lock:
            since = self._since.pop(endpoint, None)
        if since is not None:
            self._say(f"S3 at {endpoint} answers again (after {clock() - since:.1f} s)")

    def gave_up(self, endpoint: str) -> None:
        with self._lock:
            self._since.pop(endpoint, None)  # the next failure starts a new outage: said again


OUTAGES = _Outages()


def add_outage_listener(listener: Callable[[str], None]) -> Callable[[], None]:
    """Say outage lines through `listener` instead of the `sdlocal.trial.storage` logger; returns the
    function that removes it."""
    OUTAGES.listeners.append(listener)
    return lambda: OUTAGES.listeners.remove(listener) if listener in OUTAGES.listeners else None


class GaveUp(Exception):
    """A call failed for good: `cause` is the last error, `reason` says why it was not tried again."""

    def __init__(self, cause: BaseException, reason: str) -> None:
        super().__init__(f"{one_line(cause, 300)} ({reason})" if reason else one_line(cause, 300))
        self.cause = cause
        self.reason = reason


@dataclass
class Retry:
    """A policy with what it runs on. `recreate_bucket` (the launcher, on a local endpoint): a
    missing bucket is created again, then the call goes on (`on_bucket_recreated` is told)."""

    policy: RetryPolicy = field(default_factory=RetryPolicy.from_environ)
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], object] | None = None  # None: cancel.wait when there is one, else time.sleep
    rand: Callable[[], float] = random.random
    cancel: threading.Event | None = None
    recreate_bucket: bool = False
    on_bucket_recreated: Callable[[str], None] | None = None
    outages: _Outages = field(default_factory=lambda: OUTAGES)

    def run(self, endpoint: str, fn: Callable[[], T], *, bucket_seen: bool,
            recreate: Callable[[], None] | None = None) -> T:
        """`fn()` until it succeeds; raises GaveUp with the last error otherwise. FileNotFoundError
        and other errors that are not the endpoint's (a local file missing) pass through."""
        start = self.clock()
        attempt = 0
        while True:
            attempt += 1
            try:
                result = fn()
            except FileNotFoundError:
                raise
            except Exception as err:  # noqa: BLE001 - classified below; the caller maps GaveUp
                kind = classify(err)
                if kind == MISSING_BUCKET:
                    if self.recreate_bucket and recreate is not None:
                        recreate()
                        if attempt <= 2:  # created: try again at once (twice: a restart racing us)
                            continue
                    elif not bucket_seen:
                        raise GaveUp(err, "") from err
                elif kind == FATAL:
                    raise GaveUp(err, "") from err
                now = self.clock()
                pause = self.policy.delay(attempt, self.rand())
                if now - start + pause > self.policy.total_s:
                    if attempt > 1:
                        self.outages.gave_up(endpoint)
                    raise GaveUp(err, f"S3 did not answer for {now - start:.0f} s" if attempt > 1 else "") from err
                if self.cancel is not None and self.cancel.is_set():
                    raise GaveUp(err, "stopped while S3 did not answer") from err
                self.outages.failing(endpoint, err, self.policy, now)
                self._pause(pause)
                continue
            self.outages.answered(endpoint, self.clock)
            return result

    def _pause(self, seconds: float) -> None:
        if self.sleep is not None:
            self.sleep(seconds)
        elif self.cancel is not None:
            self.cancel.wait(seconds)
        else:
            time.sleep(seconds)
