"""A started container as the runtime's `Handle` (launcher/runtime/docker.py starts them): a thread
waits for its exit, another copies its output, as it comes, into its log file."""
from __future__ import annotations

import contextlib
import math
import threading
from pathlib import Path
from typing import Any

from sdlocal.launcher.runtime.base import ExitInfo, Handle


def docker_errors() -> tuple[type[BaseException], ...]:
    import docker.errors
    import requests.exceptions

    return (docker.errors.DockerException, requests.exceptions.RequestException)


class DockerHandle(Handle):
    """A started container: a thread waits for its exit, another copies its output to `log_path`."""

    in_container = True

    def __init__(self, name: str, log_path: Path, container: Any, labels: dict[str, str]) -> None:
        super().__init__(name, log_path, labels)
        self.container = container
        self._exit: int | None = None
        self._exit_info: ExitInfo | None = None
        self._done = threading.Event()
        self._closing = threading.Event()
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_thread = threading.Thread(target=self._copy_logs, name=f"logs {name}", daemon=True)
        self._wait_thread = threading.Thread(target=self._wait, name=f"wait {name}", daemon=True)
        self._log_thread.start()
        self._wait_thread.start()

    def _copy_logs(self) -> None:
        with open(self.log_path, "ab") as log, contextlib.suppress(*docker_errors()):
            for chunk in self.container.logs(stream=True, follow=True):
                log.write(chunk)
                log.flush()

    def _wait(self) -> None:
        import docker.errors
        import requests.exceptions

        code = 137
        while not self._closing.is_set():
            try:
                code = int(self.container.wait(timeout=60)["StatusCode"])
                break
            except requests.exceptions.ReadTimeout:
                continue  # the engine's wait has no end of its own: ask again
            except requests.exceptions.ConnectionError:
                # docker-py reports its own read timeout this way too, but so does a dead engine:
                # ask again, without spinning while the engine is away
                self._closing.wait(1.0)
                continue
            except docker.errors.NotFound:
                break  # removed under us (sdlocal stop, docker rm -f): killed
            except docker.errors.DockerException:
                break
        self._log_thread.join(10.0)  # the log file holds the last lines before poll() says "exited"
        self._exit_info = self._inspect_exit(code)
        self._exit = code
        self._done.set()

    def _inspect_exit(self, code: int) -> ExitInfo:
        """How the container ended: the engine knows whether its memory cgroup killed it."""
        failures: tuple[type[BaseException], ...] = (*docker_errors(), ValueError, TypeError, AttributeError)
        try:
            self.container.reload()
            state, host = self.container.attrs.get("State") or {}, self.container.attrs.get("HostConfig") or {}
            return ExitInfo.of_container(code, bool(state.get("OOMKilled")), int(host.get("Memory") or 0))
        except failures:  # removed already (sdlocal stop, docker rm -f), or the engine is away
            return ExitInfo.of_container(code)

    def exit_info(self) -> ExitInfo | None:
        return self._exit_info if self._done.is_set() else None

    def poll(self) -> int | None:
        return self._exit

    def container_pid(self) -> int | None:
        """`State.Pid` of the running container (None once it exited or when the engine cannot say)."""
        failures: tuple[type[BaseException], ...] = (*docker_errors(), ValueError, TypeError)
        try:
            self.container.reload()
            pid = int(self.container.attrs.get("State", {}).get("Pid") or 0)
        except failures:
            return None
        return pid or None

    def wait(self, timeout: float) -> int | None:
        self._done.wait(max(timeout, 0.0))
        return self._exit

    def stop(self, grace: float) -> int | None:
        """`docker stop` (SIGTERM, SIGKILL after `grace`); the exit code."""
        if not self._done.is_set():
            with contextlib.suppress(*docker_errors()):
                self.container.stop(timeout=max(1, math.ceil(grace)))
            if self.wait(15.0) is None:
                with contextlib.suppress(*docker_errors()):
                    self.container.kill()
                self.wait(15.0)
        return self._exit

    def release(self) -> None:
        self._closing.set()
