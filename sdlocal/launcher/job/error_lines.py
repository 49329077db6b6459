"""The error a training's log ends with: its last Python error line (`error_message`), what the
FailureReason says (launcher/job/artifacts.py) and what a failed host reports (launcher/job/hosts.py)."""
from __future__ import annotations

import re
from pathlib import Path

_FILE_LINE = re.compile(r'^File "(.+)", line (\d+)')
_RANK_PREFIX = re.compile(r"^\[(default|rank)\d+\]:\s*")
_ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit|Failure)\b")


def _unprefixed(line: str) -> str:
    """A log line without torch's `[rank3]:` prefix (torchrun's processes' errors carry one)."""
    return _RANK_PREFIX.sub("", line.strip())


def has_error_line(log_lines: list[str]) -> bool:
    return any(_ERROR_LINE.match(_unprefixed(line)) for line in log_lines)


def error_message(log_lines: list[str]) -> str:
    """The log's last Python error line; a SyntaxError (the script does not even compile) also
    gets the file and line from the traceback line before it, as `str(SyntaxError)` says them."""
    errors = [i for i, line in enumerate(log_lines) if _ERROR_LINE.match(_unprefixed(line))]
    if not errors:
        return log_lines[-1].strip() if log_lines else ""
    message = _unprefixed(log_lines[errors[-1]])
    if message.split(":", 1)[0] in ("SyntaxError", "IndentationError", "TabError"):
        where = [m for line in log_lines[:errors[-1]] if (m := _FILE_LINE.match(_unprefixed(line)))]
        if where and "line " not in message:
            message += f" ({Path(where[-1].group(1)).name}, line {where[-1].group(2)})"
    return message
