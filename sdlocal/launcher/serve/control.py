"""Running `sdlocal serve`: in the foreground (Ctrl-C stops its jobs, then the server) or detached
(`--background`, state in `$SDLOCAL_HOME/serve.json`, `sdlocal serve stop`), and what a script
needs to reach it: the exports and the SDK config file (`SAGEMAKER_USER_CONFIG_OVERRIDE`) naming
the default bucket (else the SDK asks STS at AWS's own address for the account) and opting out of
telemetry (else the SDK sends it to AWS)."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

from sdlocal.launcher.errors import LauncherError
from sdlocal.launcher.runtime.process import pid_alive
from sdlocal.launcher.s3.endpoint import DEFAULT_BUCKET, DUMMY_CREDENTIALS, REGION
from sdlocal.launcher.wait import Deadline, wait_for

DEFAULT_PORT = 8775
SWITCH_INTERVAL_S = 0.001


class ServeError(LauncherError):
    """The endpoint could not start, or stop."""


@dataclass(frozen=True)
class ServeState:
    pid: int
    port: int
    url: str


def config_path(home: Path) -> Path:
    return home / "serve" / "sagemaker-config.yaml"


def write_sdk_config(home: Path) -> Path:
    path = config_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    config = {"SchemaVersion": "1.0", "SageMaker": {"PythonSDK": {"Modules": {
        "Session": {"DefaultS3Bucket": DEFAULT_BUCKET}, "TelemetryOptOut": True}}}}
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def exports(url: str, home: Path) -> dict[str, str]:
    return {"AWS_ENDPOINT_URL": url, **DUMMY_CREDENTIALS, "AWS_DEFAULT_REGION": REGION,
            "SAGEMAKER_USER_CONFIG_OVERRIDE": str(config_path(home))}


def format_exports(values: dict[str, str]) -> str:
    return "\n".join(f"export {k}={v}" for k, v in values.items())


def _state_path(home: Path) -> Path:
    return home / "serve.json"


def read_state(home: Path) -> ServeState | None:
    try:
        data = json.loads(_state_path(home).read_text())
        return ServeState(int(data["pid"]), int(data["port"]), str(data["url"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def serve_foreground(home: Path, *, port: int, runtime: str, echo: Callable[[str], None],
                     ready: Callable[[str], None], stop: threading.Event | None = None,
                     host_cpus: str | None = None, host_memory: str | None = None,
                     max_concurrent_jobs: int | None = None) -> list[str]:
    """Run until `stop` (SIGINT/SIGTERM set it); `ready(url)` once it answers. Returns the jobs that
    did not end in time when stopping. `host_cpus`/`host_memory`: every job's --host-cpus/--host-memory;
    `max_concurrent_jobs`: how many run at once (None: launcher/serve/queue.py's default)."""
    from sdlocal.launcher.runtime.docker_config import HostLimits
    from sdlocal.launcher.serve.app import ServeServer

    stop = stop or threading.Event()
    host_limits = HostLimits.from_flags(host_memory, host_cpus)
    try:
        server = ServeServer(home, port=port, runtime=runtime, echo=echo, host_limits=host_limits,
                             max_concurrent_jobs=max_concurrent_jobs)
    except OSError as e:
        raise ServeError(f"cannot listen on 127.0.0.1:{port}: {e.strerror or e} (choose another --port)") from e
    # the GIL passes between threads every 1 ms, not 5: a Describe answered by one thread waits less
    # behind the jobs' threads (uploads, S3 requests of evaluators) that keep it busy
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    server.start()
    write_sdk_config(home)
    ready(server.url)
    try:
        while not stop.wait(3600):
            pass
    finally:
        echo("Stopping: running jobs are stopped (their rules end Stopped), then the endpoint")
        stuck = server.stop()
    return stuck


def start_background(home: Path, *, port: int, runtime: str, timeout: float = 60.0,
                     host_cpus: str | None = None, host_memory: str | None = None,
                     max_concurrent_jobs: int | None = None) -> ServeState:
    """Start `python -m sdlocal.launcher.serve` detached; its output goes to `$SDLOCAL_HOME/serve.log`."""
    from sdlocal.launcher.runtime.docker_config import HostLimits

    HostLimits.from_flags(host_memory, host_cpus)  # a bad value is said here, not in the log
    running = read_state(home)
    if running is not None and pid_alive(running.pid):
        raise ServeError(f"sdlocal serve already runs at {running.url} (pid {running.pid}); "
                         "`sdlocal serve stop` first")
    home.mkdir(parents=True, exist_ok=True)
    log = home / "serve.log"
    ready_file = home / "serve.ready"
    ready_file.unlink(missing_ok=True)
    env = {**os.environ, "SDLOCAL_HOME": str(home)}
    with open(log, "ab") as out:
        limits = [*(["--host-cpus", host_cpus] if host_cpus else []), *(["--host-memory", host_memory] if host_memory else []),
                  *(["--max-concurrent-jobs", str(max_concurrent_jobs)] if max_concurrent_jobs else [])]
        proc = subprocess.Popen([sys.executable, "-m", "sdlocal.launcher.serve", "--port", str(port), "--runtime", runtime,
                                 "--ready-file", str(ready_file), *limits], stdin=subprocess.DEVNULL, stdout=out,
                                stderr=out, start_new_session=True, env=env, cwd=str(home))

    def started() -> str | None:
        if ready_file.is_file() and ready_file.read_text().strip():
            return ready_file.read_text().strip()
        return "" if proc.poll() is not None else None

    waited = wait_for(started, Deadline.after(timeout, time.monotonic), interval=0.1)
    if not waited.value:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
        raise ServeError(f"sdlocal serve did not start within {timeout:g} s: {' '.join(tail) or 'no output'}"
                         f" (log: {log})")
    url = str(waited.value)
    state = ServeState(proc.pid, int(url.rsplit(":", 1)[1]), url)
    _state_path(home).write_text(json.dumps(asdict(state)))
    return state


def stop_background(home: Path, timeout: float = 90.0) -> ServeState | None:
    """SIGTERM the detached server and wait for it (it stops its jobs first); None if none runs."""
    state = read_state(home)
    if state is None or not pid_alive(state.pid):
        _state_path(home).unlink(missing_ok=True)
        return None
    with contextlib.suppress(ProcessLookupError):
        os.kill(state.pid, signal.SIGTERM)

    def gone() -> bool:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(state.pid, os.WNOHANG)
        return not pid_alive(state.pid)

    if not wait_for(gone, Deadline.after(timeout, time.monotonic), interval=0.1).ready:
        raise ServeError(f"sdlocal serve (pid {state.pid}) is still running {timeout:g} s after SIGTERM")
    _state_path(home).unlink(missing_ok=True)
    return state
