"""The embedded S3: a moto server started detached on a loopback port on first use, shared by every
sdlocal command of a user (one per SDLOCAL_HOME). Its port and pid are kept in `$SDLOCAL_HOME/s3.json`
and reused by later commands after checking that it answers; `sdlocal s3 stop` stops it. Its
buckets and objects are kept in `$SDLOCAL_HOME/s3-data/` (launcher/s3/store.py) and loaded back
when it starts again, on the port it had (`s3.port`) when that is free, so that running evaluators
find it where it was; a job using it starts it again when it stops answering (`EmbeddedWatchdog`)."""
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
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sdlocal.launcher.errors import S3EndpointError
from sdlocal.launcher.runtime.process import pid_alive
from sdlocal.launcher.wait import Deadline, wait_for


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


def _is_our_server(pid: int) -> bool:
    cmdline = Path(f"/proc/{pid}/cmdline")
    if not cmdline.exists():  # not Linux: trust the state file's pid only while it is alive
        return pid_alive(pid)
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
        if not pid_alive(state.pid) or not _is_our_server(state.pid):
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(state.pid, signal.SIGTERM)

        def gone() -> bool:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(state.pid, os.WNOHANG)  # reap it when we are its parent
            return not pid_alive(state.pid)

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
