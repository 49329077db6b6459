"""What the launcher says about an evaluator that died: how it ended (exit code, signal, OOM-kill),
whether during the import of its rule file, and its last meaningful log lines, in at most 1024
characters of StatusDetails (the end of the log kept)."""
from __future__ import annotations

from pathlib import Path

from sdlocal.launcher.job.evaluator_logs import (
    LogFollower,
    death_details,
    import_in_progress,
    meaningful_lines,
    tail_lines,
)
from sdlocal.launcher.runtime import ExitInfo

LOG = """\
2026-01-01 12:00:00,001 evaluator.rule_invoker INFO Started execution of rule MyRule at step 0
evaluator: MyRule: InProgress

2026-01-01 12:00:01,002 evaluator.watchdog INFO importing custom rule file my_rule.py
loading my weights
2026-01-01 12:00:01,500 botocore.credentials WARNING Found credentials in environment variables.
Traceback (most recent call last):
  File "/tmp/my_rule.py", line 3, in <module>
    import torch
    ^^^^^^^^^^^^
ModuleNotFoundError: No module named 'torch'
sdlocal-watchdog: Rule MyRule: step 3 has been evaluating for 30 s (limit 60 s)
""".splitlines()


def test_meaningful_lines_leave_out_chatter_blanks_frames_and_notes() -> None:
    assert meaningful_lines(LOG, 3) == [
        "loading my weights",
        "2026-01-01 12:00:01,500 botocore.credentials WARNING Found credentials in environment variables.",
        "ModuleNotFoundError: No module named 'torch'",
    ]


def test_import_in_progress_until_it_is_done() -> None:
    assert import_in_progress(LOG) == "my_rule.py"
    done = [*LOG, "2026-01-01 12:00:02,000 evaluator.watchdog INFO imported custom rule file my_rule.py"]
    assert import_in_progress(done) is None
    assert import_in_progress(["nothing here"]) is None


def test_how_it_ended() -> None:
    assert ExitInfo.of_process(1).describe() == "exited (code 1)"
    assert ExitInfo.of_process(-9).describe() == "was killed by signal 9 (SIGKILL)"  # OOM killer or not: unknown
    assert ExitInfo.of_container(137).describe() == "exited (code 137: killed by signal 9, SIGKILL)"
    assert ExitInfo.of_container(137, True, 256 * 1024**2).describe() == (
        "was OOM-killed (code 137: over its memory limit of 256 MiB)")
    assert ExitInfo.of_container(3).describe() == "exited (code 3)"


def test_death_details_say_the_import_and_fit_1024_keeping_the_end() -> None:
    details = death_details(ExitInfo.of_process(3), LOG)
    assert details.startswith("ClientError: the rule evaluator exited (code 3) during the import of custom rule "
                              "file my_rule.py, without a final status. Last log lines: loading my weights | ")
    assert details.endswith("ModuleNotFoundError: No module named 'torch'")
    long = [f"line {i} " + "x" * 600 for i in range(10)] + ["TheError: the end"]
    details = death_details(ExitInfo.of_process(-9), long)
    assert len(details) == 1024 and details.endswith("TheError: the end")
    assert details.startswith("ClientError: the rule evaluator was killed by signal 9 (SIGKILL) without a final "
                              "status. Last log lines: ...")
    assert death_details(ExitInfo.of_container(137), []).endswith("Last log lines: (none)")


def test_tail_and_follower(tmp_path: Path) -> None:
    log = tmp_path / "rule.log"
    log.write_bytes(b"a" * 100 + b"\nfirst\nsecond\n")
    assert tail_lines(log, max_bytes=12) == ["second"]  # the cut line is dropped
    assert tail_lines(tmp_path / "none.log") == []
    follower = LogFollower(log)
    assert follower.new_lines()[-2:] == ["first", "second"]
    with open(log, "ab") as f:
        f.write(b"sdlocal-watchdog: Rule R: step 1 has been evaluating for 30 s (limit 60 s)\npart")
    assert follower.watchdog_notes() == ["Rule R: step 1 has been evaluating for 30 s (limit 60 s)"]
    with open(log, "ab") as f:
        f.write(b"ial line\n")
    assert follower.new_lines() == ["partial line"]  # a line is given once it is whole
