"""What `sdlocal run` shows while its job runs, and what `sdlocal logs -f` follows.

`FileTail` reads the lines appended to a log file (a line still being written waits for its
newline, but at the end). `LiveOutput` is `sdlocal run`'s screen: the training's log lines as
they are written (each prefixed by its host when the job has several), the launcher's own lines
(each rule's status change among them, launcher/job/rule_watch.py) in the order they happen, and,
on a terminal, one status line kept at the bottom, redrawn every `interval` s: the last step the
hook saved, how many steps it saved, the time since the job started, the rules InProgress and
IssuesFound (what the lifecycle publishes: launcher/job/record.py's JobState). It writes to
stderr, as every line of `run` but its result (stdout: the statuses, text or --json).
"""
from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sdlocal.launcher.job.record import RuleStatus, Snapshot

CLEAR_LINE = "\r\x1b[K"


class FileTail:
    """The lines appended to `path` since the last `read()` (the file may not exist yet)."""

    def __init__(self, path: Path, offset: int = 0) -> None:
        self.path = path
        self.offset = offset

    def read(self, final: bool = False) -> list[str]:
        """Complete lines; with `final`, a last line without its newline too."""
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except FileNotFoundError:
            return []
        end = len(data) if final else data.rfind(b"\n") + 1
        if end <= 0:
            return []
        self.offset += end
        text = data[:end].decode("utf-8", errors="replace")
        return [line.removesuffix("\r") for line in text.split("\n")[: None if not text.endswith("\n") else -1]]


class SavedSteps:
    """The steps the hook saved in a local trial (its index files: `index/<bucket>/<step>_<worker>.json`),
    counted incrementally: a bucket folder once followed by another is not listed again."""

    def __init__(self, trial: Path) -> None:
        self.index = trial / "index"
        self._done: dict[str, set[int]] = {}  # bucket folder -> its steps, for folders no longer the last

    def count(self) -> tuple[int, int | None]:
        """(steps saved, the last of them)."""
        try:
            buckets = sorted(e.name for e in os.scandir(self.index) if e.is_dir())
        except OSError:
            return 0, None
        steps: set[int] = set()
        for i, bucket in enumerate(buckets):
            known = self._done.get(bucket)
            if known is None:
                known = self._steps(bucket)
                if i < len(buckets) - 1:
                    self._done[bucket] = known
            steps |= known
        return len(steps), max(steps) if steps else None

    def _steps(self, bucket: str) -> set[int]:
        out = set()
        try:
            for entry in os.scandir(self.index / bucket):
                head = entry.name.split("_", 1)[0]
                if entry.name.endswith(".json") and head.isdigit():
                    out.add(int(head))
        except OSError:
            pass
        return out


def status_line(snapshot: Snapshot | None, saved: int, last_step: int | None, elapsed_s: float) -> str:
    minutes, seconds = divmod(int(elapsed_s), 60)
    parts = [snapshot.secondary if snapshot is not None else "Starting"]
    parts.append(f"step {last_step}" if last_step is not None else "no step saved yet")
    parts.append(f"{saved} step{'s' if saved != 1 else ''} saved")
    parts.append(f"{minutes}:{seconds:02d} elapsed")
    if snapshot is not None and snapshot.rules:
        parts.append(f"rules: {snapshot.count(RuleStatus.IN_PROGRESS)} InProgress, "
                     f"{snapshot.count(RuleStatus.ISSUES_FOUND)} IssuesFound")
    return " | ".join(parts)


class LiveOutput:
    """`sdlocal run`'s screen while the job runs (module docstring). `echo` is the launcher's;
    `attach` is given the job's lifecycle (run_job's on_lifecycle); `start`/`finish` around the run."""

    def __init__(self, logs: Sequence[tuple[str, Path]], trial: Path, *, write: Callable[[str], None],
                 terminal: bool, interval: float = 0.5, clock: Callable[[], float] = time.monotonic,
                 width: Callable[[], int] = lambda: shutil.get_terminal_size().columns) -> None:
        several = len(logs) > 1
        self.tails = [(f"[{host}] " if several else "", FileTail(path)) for host, path in logs]
        self.steps = SavedSteps(trial)
        self.write = write  # writes its text as given (no newline added)
        self.terminal = terminal
        self.interval = interval
        self.clock = clock
        self.width = width
        self.started = clock()
        self.state: Any = None  # the lifecycle's JobState
        self._shown = ""  # the status line on screen
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sdlocal-live", daemon=True)

    def attach(self, lifecycle: Any) -> None:
        self.state = lifecycle.state

    def start(self) -> None:
        self._thread.start()

    def finish(self) -> None:
        """The last lines (a last one without newline too), the status line cleared."""
        self._done.set()
        if self._thread.is_alive():
            self._thread.join(10)
        with self._lock:
            self._clear()
            self._pump(final=True)

    def echo(self, line: str) -> None:
        """A launcher line: after the log lines written before it, above the status line."""
        with self._lock:
            self._clear()
            self._pump()
            self.write(line + "\n")
            self._draw()

    def _run(self) -> None:
        while not self._done.wait(self.interval):
            with self._lock:
                self._clear()
                self._pump()
                self._draw()

    def _pump(self, final: bool = False) -> None:
        for prefix, tail in self.tails:
            lines = tail.read(final)
            if lines:
                self.write("".join(f"{prefix}{line}\n" for line in lines))

    def _clear(self) -> None:
        if self._shown:
            self.write(CLEAR_LINE)
            self._shown = ""

    def _draw(self) -> None:
        if not self.terminal or self._done.is_set():
            return
        saved, last = self.steps.count()
        snapshot = self.state.snapshot() if self.state is not None else None
        line = status_line(snapshot, saved, last, self.clock() - self.started)[: max(10, self.width() - 1)]
        self.write(line)
        self._shown = line
