"""A moto server in a process of its own (`python -m sdlocal.launcher.s3.server`), for tests that kill,
freeze and restart it: an in-process ThreadedMotoServer shares moto's state with the test, so it
never really comes back empty."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def answering(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/moto-api/", timeout=1) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


class MotoProcess:
    """`start()`, `kill()` (SIGKILL), `freeze()` / `thaw()` (SIGSTOP / SIGCONT), always on `port`.
    `data_dir`: the embedded S3's persistence folder (None: memory only, as a plain moto)."""

    def __init__(self, port: int | None = None, data_dir: Path | None = None, log: Path | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.data_dir = data_dir
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> None:
        args = [sys.executable, "-m", "sdlocal.launcher.s3.server", "--port", str(self.port)]
        if self.data_dir is not None:
            args += ["--data-dir", str(self.data_dir)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        out = open(self.log, "ab") if self.log else subprocess.DEVNULL  # noqa: SIM115 - the child holds it
        self.proc = subprocess.Popen(args, cwd=REPO, env=env, stdout=out, stderr=out, start_new_session=True)
        deadline = time.monotonic() + timeout
        while not answering(self.url):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"moto did not start on {self.port} (exit {self.proc.poll()})")
            time.sleep(0.05)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        """SIGTERM: a clean stop."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            self.proc.wait(10)

    def freeze(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)
