"""The running jobs of a SDLOCAL_HOME, and stopping one from another terminal (`sdlocal stop JOB`).

Every job that runs (`sdlocal run`, or a CreateTrainingJob of `sdlocal serve`: launcher/job/run.py)
registers itself in `$SDLOCAL_HOME/running/<job>.json` (the pid of the process that runs it, its
job folder) and polls `<job folder>/stop-request`; `sdlocal stop` creates that file and waits
(deadline) for the job to end `Stopped`. With no live process registered for the job, `stop`
removes the job's leftover containers by label instead: never those of a job that runs.
"""
from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sdlocal.launcher.errors import JobError
from sdlocal.launcher.runtime.process import pid_alive
from sdlocal.launcher.wait import Deadline, wait_for

STOP_FILE = "stop-request"


@dataclass(frozen=True)
class RunningJob:
    job_name: str
    pid: int
    job_dir: Path


def _start_token(pid: int) -> str | None:
    """When process `pid` started (field 22 of /proc/<pid>/stat, in clock ticks since boot); None
    where there is no /proc. With the pid it names one process: a pid reused later differs."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()  # after "pid (comm) ": field 3 is fields[0]
    return fields[19] if len(fields) > 19 else None


def _entry(home: Path, job_name: str) -> Path:
    return home / "running" / f"{job_name}.json"


def register(home: Path, job_name: str, job_dir: Path, pid: int | None = None) -> Path:
    """Record this launcher as the one running `job_name`; JobError when another live launcher
    runs it (its record, stop file and outputs stay its own)."""
    running = find_running(home, job_name)
    if running is not None and running.pid != (pid or os.getpid()):
        raise JobError(f"Training job {job_name} is already running (sdlocal run, pid {running.pid}); "
                       "choose another --job-name")
    path = _entry(home, job_name)
    path.parent.mkdir(parents=True, exist_ok=True)
    owner = pid or os.getpid()
    path.write_text(json.dumps({"pid": owner, "job_dir": str(job_dir), "started": _start_token(owner)}))
    return path


def unregister(home: Path, job_name: str, pid: int | None = None) -> None:
    """Remove the record of `job_name` if it is this launcher's (`pid`, default this process)."""
    path = _entry(home, job_name)
    try:
        owner = int(json.loads(path.read_text())["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        owner = None  # torn or foreign: nobody's record, remove it
    if owner in (None, pid or os.getpid()):
        path.unlink(missing_ok=True)


def find_running(home: Path, job_name: str) -> RunningJob | None:
    """The job's launcher if it is alive (a stale entry of a dead launcher is removed)."""
    path = _entry(home, job_name)
    try:
        data = json.loads(path.read_text())
        job = RunningJob(job_name, int(data["pid"]), Path(data["job_dir"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    started = data.get("started")
    if not pid_alive(job.pid) or (started is not None and _start_token(job.pid) not in (started, None)):
        path.unlink(missing_ok=True)  # a dead launcher, or its pid reused by another process
        return None
    return job


def request_stop(job_dir: Path) -> Path:
    path = job_dir / STOP_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(str(time.time()))
    return path


def wait_ended(home: Path, job: RunningJob, timeout: float, *, clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], None] = time.sleep) -> bool:
    """True when the launcher unregistered or died within `timeout` seconds."""
    return wait_for(lambda: find_running(home, job.job_name) is None, Deadline.after(timeout, clock),
                    sleep=sleep).ready


class StopFileWatcher:
    """Sets `event` when `<job_dir>/stop-request` appears (one written before the watch started is
    ignored: it belongs to an earlier run of the same job name). Polls until `close()`."""

    def __init__(self, job_dir: Path, event: threading.Event, interval: float = 0.5) -> None:
        self.path = job_dir / STOP_FILE
        self.event = event
        self.interval = interval
        self.started = time.time()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sdlocal-stop-watch", daemon=True)

    def start(self) -> StopFileWatcher:
        self._thread.start()
        return self

    def _requested(self) -> bool:
        try:
            return self.path.stat().st_mtime >= self.started - 1.0
        except OSError:
            return False

    def _run(self) -> None:
        while not self._closed.wait(self.interval):
            if self._requested():
                self.event.set()
                return

    def close(self) -> None:
        """Stop watching and remove the stop file (nothing when the watch never started)."""
        if self._thread.ident is None:
            return
        self._closed.set()
        self._thread.join(5.0)
        self.path.unlink(missing_ok=True)
