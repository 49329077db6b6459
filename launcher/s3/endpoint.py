"""Which S3 to talk to, and the embedded S3 server's lifecycle.

Endpoint resolution, first match wins:
1. `--s3-endpoint-url` (flag), 2. `AWS_ENDPOINT_URL_S3` (env), then `AWS_ENDPOINT_URL` (every
service's endpoint, as LocalStack's docs set it; botocore itself honours it), 3. AWS credentials
present (env keys, a profile, `~/.aws/credentials` or `~/.aws/config`): real S3, said out loud,
4. the embedded S3: a moto server started detached on a loopback port on first use; its port and
pid are kept in `$SDLOCAL_HOME/s3.json` (default `~/.sdlocal`) and reused by later commands after
checking that it answers; `sdlocal s3 stop` stops it. Dummy credentials. Its buckets and objects
are kept in `$SDLOCAL_HOME/s3-data/` (launcher/s3/store.py) and loaded back when it starts again,
on the port it had (`s3.port`) when that is free, so that running evaluators find it where it
was; a job using it starts it again when it stops answering (`EmbeddedWatchdog`).
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sdlocal.launcher.errors import S3EndpointError
from sdlocal.launcher.wait import Deadline, wait_for

DEFAULT_BUCKET = "sdlocal"
REGION = "us-east-1"
DUMMY_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "sdlocal", "AWS_SECRET_ACCESS_KEY": "sdlocal"}


def sdlocal_home(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    return Path(env.get("SDLOCAL_HOME") or Path.home() / ".sdlocal")


@dataclass(frozen=True)
class S3Endpoint:
    url: str | None  # None: AWS's own endpoints
    source: str  # "flag" | "env" (AWS_ENDPOINT_URL_S3) | "env-global" (AWS_ENDPOINT_URL) | "aws" | "embedded" | "serve"
    dummy_credentials: bool = False

    def client(self) -> Any:
        import boto3

        from sdlocal.trial.storage import client_config

        # bounded timeouts (a frozen endpoint fails a try instead of hanging it), no botocore retries:
        # trial's Storage retries every call through outages (trial/storage/_retry.py)
        kwargs: dict[str, Any] = {"region_name": os.environ.get("AWS_DEFAULT_REGION") or REGION,
                                  "config": client_config()}
        if self.url:
            kwargs["endpoint_url"] = self.url
        if self.dummy_credentials:
            kwargs["aws_access_key_id"] = DUMMY_CREDENTIALS["AWS_ACCESS_KEY_ID"]
            kwargs["aws_secret_access_key"] = DUMMY_CREDENTIALS["AWS_SECRET_ACCESS_KEY"]
        return boto3.client("s3", **kwargs)

    def child_env(self) -> dict[str, str]:
        """Environment for the training/evaluator processes so that they reach the same S3."""
        env: dict[str, str] = {}
        if self.url:
            env["AWS_ENDPOINT_URL_S3"] = self.url
        if self.dummy_credentials:
            env.update(DUMMY_CREDENTIALS)
            env.setdefault("AWS_DEFAULT_REGION", REGION)
        return env

    def describe(self) -> str:
        return {
            "flag": f"S3: {self.url} (--s3-endpoint-url)",
            "env": f"S3: {self.url} (AWS_ENDPOINT_URL_S3)",
            "env-global": f"S3: {self.url} (AWS_ENDPOINT_URL)",
            "aws": "S3: Amazon S3 with your AWS credentials (set --s3-endpoint-url to use another endpoint)",
            "embedded": f"S3: embedded server at {self.url} (stop it with `sdlocal s3 stop`)",
            "serve": f"S3: sdlocal serve at {self.url}",
        }[self.source]


def aws_credentials_present(environ: Mapping[str, str] | None = None, home: Path | None = None) -> bool:
    """Credentials that boto3 would find without asking the instance metadata service."""
    env = os.environ if environ is None else environ
    if env.get("AWS_ACCESS_KEY_ID") or env.get("AWS_PROFILE") or env.get("AWS_WEB_IDENTITY_TOKEN_FILE"):
        return True
    if env.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") or env.get("AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        return True
    aws_dir = (home or Path.home()) / ".aws"
    files = [env.get("AWS_SHARED_CREDENTIALS_FILE") or aws_dir / "credentials", env.get("AWS_CONFIG_FILE") or aws_dir / "config"]
    return any(Path(f).is_file() for f in files)


def check_endpoint_url(url: str, where: str) -> None:
    """An endpoint is an http(s)://host[:port][/path] URL; botocore would fail later with a traceback."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError as e:
        raise S3EndpointError(f"{where}: {url!r} is not a URL: {e}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise S3EndpointError(f"{where}: {url!r} is not an http:// or https:// URL with a host")


def resolve_endpoint(
    flag: str | None,
    *,
    environ: Mapping[str, str] | None = None,
    credentials_present: Callable[[], bool] | None = None,
    embedded: EmbeddedS3 | None = None,
) -> S3Endpoint:
    env = os.environ if environ is None else environ
    has_credentials = credentials_present or (lambda: aws_credentials_present(env))
    # the first endpoint given wins; AWS_ENDPOINT_URL is LocalStack's way: one endpoint for every service
    given = ((flag, "flag", "--s3-endpoint-url"), (env.get("AWS_ENDPOINT_URL_S3"), "env", "AWS_ENDPOINT_URL_S3"),
             (env.get("AWS_ENDPOINT_URL"), "env-global", "AWS_ENDPOINT_URL"))
    for url, source, where in given:
        if url:
            check_endpoint_url(url, where)
            # LocalStack and moto take any credentials: a custom endpoint without any gets dummy ones
            return S3Endpoint(url, source, dummy_credentials=not has_credentials())
    if has_credentials():
        return S3Endpoint(None, "aws")
    server = (embedded or EmbeddedS3(sdlocal_home(env))).ensure()
    return S3Endpoint(server.url, "embedded", dummy_credentials=True)


def ensure_bucket(client: Any, bucket: str) -> None:
    """Create the bucket unless it exists (embedded/custom endpoints; never called for AWS)."""
    from sdlocal.trial.storage import S3Storage

    S3Storage(bucket, "", client=client).ensure_root()


@dataclass(frozen=True)
class ServerState:
    port: int
    pid: int
    url: str


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def is_answering(url: str, timeout: float = 1.0) -> bool:
    """A moto server answers `GET /moto-api/` (another program on a reused port does not)."""
    try:
        with urllib.request.urlopen(f"{url}/moto-api/", timeout=timeout) as resp:
            return bool(resp.status == 200)
    except (OSError, ValueError):
        return False


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _is_our_server(pid: int) -> bool:
    cmdline = Path(f"/proc/{pid}/cmdline")
    if not cmdline.exists():  # not Linux: trust the state file's pid only while it is alive
        return _pid_alive(pid)
    return b"sdlocal.launcher.s3.server" in cmdline.read_bytes()


class EmbeddedS3:
    """The detached moto server shared by every sdlocal command of a user (one per SDLOCAL_HOME)."""

    def __init__(
        self,
        home: Path,
        *,
        python: str = sys.executable,
        start_timeout: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.home = home
        self.python = python
        self.start_timeout = start_timeout
        self.clock = clock
        self.sleep = sleep
        self.state_path = home / "s3.json"
        self.log_path = home / "s3.log"
        self.port_path = home / "s3.port"  # the last port: a restart takes it again when it is free
        self.data_dir = home / "s3-data"

    def read_state(self) -> ServerState | None:
        try:
            data = json.loads(self.state_path.read_text())
            return ServerState(int(data["port"]), int(data["pid"]), str(data["url"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def running(self) -> ServerState | None:
        state = self.read_state()
        return state if state is not None and is_answering(state.url) else None

    def ensure(self) -> ServerState:
        """The running server (reused if it answers), else a freshly started one."""
        with self._lock():
            state = self.read_state()
            if state is not None and is_answering(state.url):
                return state
            if state is not None:  # stale: its process died or stopped answering
                self._kill(state, grace=2.0)
            return self._start()

    def stop(self, grace: float = 5.0) -> ServerState | None:
        """Stop the server; returns what was stopped (None if nothing was recorded)."""
        with self._lock():
            state = self.read_state()
            if state is None:
                return None
            self._kill(state, grace)
            self.state_path.unlink(missing_ok=True)
            return state

    def usage(self) -> Any:
        """Buckets, objects and bytes kept on disk (launcher/_s3_store.Usage)."""
        from sdlocal.launcher.s3.store import DiskStore

        return DiskStore(self.data_dir).usage()

    def _port(self) -> int:
        try:
            last = int(self.port_path.read_text())
        except (OSError, ValueError):
            return _free_port()
        with socket.socket() as s:
            # as the server binds: connections of the last server in TIME_WAIT do not hold the port
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", last))
            except OSError:  # taken meanwhile: any port (running evaluators will not find it)
                return _free_port()
        return last

    def _start(self) -> ServerState:
        self.home.mkdir(parents=True, exist_ok=True)
        port = self._port()
        with open(self.log_path, "ab") as log:
            proc = subprocess.Popen(
                [self.python, "-m", "sdlocal.launcher.s3.server", "--port", str(port), "--data-dir", str(self.data_dir)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                cwd=str(self.home),
            )
        state = ServerState(port, proc.pid, f"http://127.0.0.1:{port}")

        def started() -> str | None:
            if is_answering(state.url, timeout=0.5):
                return "answering"
            return "exited" if proc.poll() is not None else None

        waited = wait_for(started, Deadline.after(self.start_timeout, self.clock), interval=0.1, sleep=self.sleep)
        if waited.value != "answering":
            self._kill(state, grace=1.0)
            proc.wait(timeout=5)
            tail = self.log_path.read_text(errors="replace")[-500:] if self.log_path.exists() else ""
            raise S3EndpointError(f"the embedded S3 server did not start on port {port}: {tail.strip()}")
        self.state_path.write_text(json.dumps(asdict(state)))
        self.port_path.write_text(str(port))
        return state

    def _kill(self, state: ServerState, grace: float) -> None:
        if not _pid_alive(state.pid) or not _is_our_server(state.pid):
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(state.pid, signal.SIGTERM)

        def gone() -> bool:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(state.pid, os.WNOHANG)  # reap it when we are its parent
            return not _pid_alive(state.pid)

        wait_for(gone, Deadline.after(grace, self.clock), interval=0.05, sleep=self.sleep)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(state.pid, signal.SIGKILL)

    @contextlib.contextmanager
    def _lock(self, timeout: float = 60.0) -> Iterator[None]:
        """Serialize start/stop between concurrent sdlocal commands (flock, polled with a deadline)."""
        self.home.mkdir(parents=True, exist_ok=True)
        with open(self.home / "s3.lock", "w") as fh:
            def locked() -> bool:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    return False
                return True

            if not wait_for(locked, Deadline.after(timeout, self.clock), interval=0.1, sleep=self.sleep).ready:
                raise S3EndpointError(f"another sdlocal holds {self.home / 's3.lock'}")
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)


class EmbeddedWatchdog:
    """While a job runs on the embedded S3: a thread that starts it again when it stopped answering
    (a crash, `sdlocal s3 stop`, a frozen server: two looks `interval` apart). It comes back on its
    port with its data; meanwhile every S3 call waits (trial/storage/_retry.py)."""

    def __init__(self, server: EmbeddedS3, url: str, echo: Callable[[str], None], interval: float = 2.0) -> None:
        self.server = server
        self.url = url
        self.echo = echo
        self.interval = interval
        self.restarts = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sdlocal-s3-watchdog", daemon=True)

    def start(self) -> EmbeddedWatchdog:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(self.server.start_timeout + 10)

    def _run(self) -> None:
        missed = 0
        while not self._stop.wait(self.interval):
            if is_answering(self.url):
                missed = 0
                continue
            missed += 1
            if missed < 2:
                continue
            try:
                state = self.server.ensure()
            except Exception as e:  # noqa: BLE001 - said, and tried again at the next look
                self.echo(f"Warning: the embedded S3 does not answer and could not be started again: {e}")
                continue
            missed = 0
            if state.url != self.url:
                self.echo(f"Warning: the embedded S3 came back at {state.url}, not {self.url}: the job's "
                          "processes cannot reach it")
                self.url = state.url
            else:
                self.restarts += 1
                self.echo(f"Warning: the embedded S3 at {self.url} had stopped answering: started again "
                          f"(its data from {self.server.data_dir})")
