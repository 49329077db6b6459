"""What an evaluator's log says when it died: the last meaningful lines, whether it died while
importing its custom rule file, the StatusDetails the launcher writes for it, and the watchdog's
notes relayed while it runs (`LogFollower`).

Meaningful: not blank, not the evaluator's routine INFO/DEBUG chatter (its logging format:
`2024-01-01 12:00:00,000 name INFO ...`), not a traceback's frames (the exception line after
them is kept), not the watchdog's progress notes. What is left is what the user needs: the
error, the rule's own prints and warnings, the watchdog's verdict.
"""
from __future__ import annotations

import re
from pathlib import Path

from sdlocal.evaluator.status import MAX_DETAILS
from sdlocal.evaluator.watchdog import IMPORT_DONE, IMPORT_STARTED, PREFIX
from sdlocal.launcher.runtime import ExitInfo

TAIL_BYTES = 64 * 1024
_ROUTINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} \S+ (?:DEBUG|INFO) ")
_STATUS_NOTE = re.compile(r"^evaluator: .*: (?:InProgress|IssuesFound|NoIssuesFound)\b")


def tail_lines(path: Path, max_bytes: int = TAIL_BYTES) -> list[str]:
    """The last lines of a log file (at most its last `max_bytes`; the first, partial line dropped)."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, 2)
            f.seek(max(0, size - max_bytes))
            data = f.read()
    except OSError:
        return []
    lines = data.decode("utf-8", errors="replace").splitlines()
    return lines[1:] if size > max_bytes else lines


def is_meaningful(line: str) -> bool:
    text = line.rstrip()
    if not text.strip() or _ROUTINE.match(text) or _STATUS_NOTE.match(text):
        return False
    if text.startswith(("Traceback (most recent call last)", " ", "\t")):  # frames, code, ^^^ markers
        return False
    return not (text.startswith(PREFIX) and " for " in text and "(limit " in text)  # a progress note


def meaningful_lines(lines: list[str], n: int = 3) -> list[str]:
    return [line.rstrip() for line in lines if is_meaningful(line)][-n:]


def import_in_progress(lines: list[str]) -> str | None:
    """The custom rule file whose import the log says began and never ended, else None."""
    for line in reversed(lines):
        if IMPORT_DONE in line:
            return None
        at = line.find(IMPORT_STARTED + " ")
        if at >= 0:
            return line[at + len(IMPORT_STARTED) + 1:].strip() or "?"
    return None


def death_details(exit_info: ExitInfo | None, lines: list[str]) -> str:
    """StatusDetails for an evaluator that ended without a final status (at most 1024 characters,
    the end of the log lines kept)."""
    how = exit_info.describe() if exit_info is not None else "ended"
    importing = import_in_progress(lines)
    during = f" during the import of custom rule file {importing}," if importing else ""
    head = f"ClientError: the rule evaluator {how}{during} without a final status. Last log lines: "
    last = " | ".join(meaningful_lines(lines)) or "(none)"
    room = MAX_DETAILS - len(head)
    if len(last) > room:
        last = "..." + last[-(room - 3):]
    return (head + last)[:MAX_DETAILS]


def summary_of_death(exit_info: ExitInfo | None, lines: list[str]) -> str:
    """The launcher's one line: 'its evaluator exited (code 3) during the import of ...'."""
    how = exit_info.describe() if exit_info is not None else "ended"
    importing = import_in_progress(lines)
    return f"its evaluator {how}" + (f" during the import of custom rule file {importing}" if importing else "")


class LogFollower:
    """The lines a log file gained since the last call (a line still being written waits)."""

    def __init__(self, path: Path, max_bytes: int = 1024 * 1024) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.offset = 0
        self._partial = b""

    def new_lines(self) -> list[str]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read(self.max_bytes)
        except OSError:
            return []
        self.offset += len(data)
        data = self._partial + data
        *complete, self._partial = data.split(b"\n")
        return [line.decode("utf-8", errors="replace") for line in complete]

    def watchdog_notes(self) -> list[str]:
        """The watchdog's lines among the new ones, without their prefix."""
        return [line[len(PREFIX):].rstrip() for line in self.new_lines() if line.startswith(PREFIX)]
