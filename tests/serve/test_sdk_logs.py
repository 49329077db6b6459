"""Every line of a training log reaches the SDK (the real SDK v2 in its side virtualenv, against
`sdlocal serve`): fit(logs=True) and Session().logs_for_job(job, wait=True) show the training's
lines in order, blank lines included (as a space: CloudWatch has no empty messages), a line longer
than a CloudWatch event in consecutive pieces."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from sdlocal.launcher.serve.logs import EVENT_OVERHEAD, MAX_EVENT_BYTES

SCRIPTS = Path(__file__).parent / "scripts"
STATUS = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \w+ - .+$")  # the SDK's status message


def region(lines: list[str]) -> list[str]:
    """The lines between the script's BEGIN and END. (The SDK prints its status message without a
    newline: the first log line it shows after one is glued to it, "... Training job completedBEGIN".)"""
    start = next(i for i, line in enumerate(lines) if line.endswith("BEGIN"))
    return lines[start + 1:lines.index("END", start)]


def check_in_order(file_lines: list[str], shown: list[str], *, prefixed: bool = False) -> int:
    """`shown` (what the SDK printed, BEGIN..END) is `file_lines` one for one, a blank line as a
    space, the long line as consecutive pieces; the number of lines checked. `prefixed`: fit()'s
    live output, where the SDK may print a status message (no newline) just before a log line."""
    i = 0
    for line in file_lines:
        if len(line.encode()) > MAX_EVENT_BYTES - EVENT_OVERHEAD:
            joined = ""
            while len(joined) < len(line):
                piece = shown[i]
                assert len(piece.encode()) + EVENT_OVERHEAD <= MAX_EVENT_BYTES
                joined += piece
                i += 1
            assert joined == line
            continue
        want = line or " "
        got = shown[i]
        glued = prefixed and got.endswith(want) and STATUS.match(got[:len(got) - len(want)]) is not None
        assert got == want or glued, (i, want[:80], got[:80])
        i += 1
    assert i == len(shown), shown[i:i + 5]
    return len(file_lines)


def test_every_log_line_reaches_the_sdk(served, sagemaker_python: Path, tmp_path: Path) -> None:
    home, exports = served
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), **exports}
    proc = subprocess.run([str(sagemaker_python), str(SCRIPTS / "sdk_logs_job.py"), str(SCRIPTS / "print_lines")],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=400)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-5000:]
    seen = json.loads(out.split("SDK-LOGS ", 1)[1].splitlines()[0])
    log = (home / "jobs" / seen["job"] / "logs" / "training.log").read_text()
    file_lines = region(log.split("\n"))
    assert len(file_lines) > 1200 and file_lines.count("") >= 24 and max(map(len, file_lines)) == 300_000
    read = check_in_order(file_lines, region(seen["logs_for_job"].split("\n")))
    shown = check_in_order(file_lines, region(seen["fit"].split("\n")), prefixed=True)
    print(f"{read} lines read back through logs_for_job, {shown} through fit(logs=True), "
          f"{file_lines.count('')} of them blank")
