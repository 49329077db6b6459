"""`sdlocal run` shows the job as it runs (launcher/cli/follow.py): the training's lines as they are
written, before the launcher's lines that follow them, prefixed by host for several hosts; on a
terminal a status line; `--quiet` keeps the launcher's lines only; `sdlocal logs -f` follows a
running job until it ends. The end-to-end tests run real `sdlocal run`s (one on a pty)."""
from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

from sdlocal.launcher.cli.follow import CLEAR_LINE, FileTail, LiveOutput, SavedSteps
from sdlocal.launcher.job.record import JobState, RuleStatus
from sdlocal.trial.writer import TrialWriter

REPO = Path(__file__).resolve().parents[3]


def test_file_tail_gives_complete_lines_and_the_last_partial_one_at_the_end(tmp_path: Path) -> None:
    log = tmp_path / "training.log"
    tail = FileTail(log)
    assert tail.read() == []  # not written yet
    log.write_bytes(b"one\r\ntwo\nthr")
    assert tail.read() == ["one", "two"]
    assert tail.read() == []  # "thr" waits for its newline
    with open(log, "ab") as fh:
        fh.write(b"ee\nfour")
    assert tail.read() == ["three"]
    assert tail.read(final=True) == ["four"]
    assert tail.read(final=True) == []


def test_saved_steps_are_counted_from_the_trial_index(tmp_path: Path) -> None:
    steps = SavedSteps(tmp_path)
    assert steps.count() == (0, None)
    writer = TrialWriter(tmp_path)
    for step in (0, 5, 999, 1000, 2005):  # three index folders (one per 1000 steps)
        writer.write_step(step, "TRAIN", step, [("loss", np.float32(1.0))])
    assert steps.count() == (5, 2005)
    writer.write_step(2010, "TRAIN", 2010, [("loss", np.float32(1.0))])
    assert steps.count() == (6, 2010)


class Screen:
    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> None:
        self.text += text


def test_log_lines_come_before_the_launcher_line_after_them_prefixed_by_host(tmp_path: Path) -> None:
    logs = [("algo-1", tmp_path / "training.log"), ("algo-2", tmp_path / "training-algo-2.log")]
    screen = Screen()
    live = LiveOutput(logs, tmp_path / "trial", write=screen.write, terminal=False, interval=60)
    live.start()
    logs[0][1].write_text("step 0 loss 1.0\n")
    logs[1][1].write_text("step 0 loss 1.1\n")
    live.echo("Training completed")
    logs[0][1].write_text("step 0 loss 1.0\nlast words")
    live.finish()
    assert screen.text == ("[algo-1] step 0 loss 1.0\n[algo-2] step 0 loss 1.1\nTraining completed\n"
                           "[algo-1] last words\n")  # no status line: not a terminal


def test_a_terminal_gets_a_status_line_that_the_other_lines_replace(tmp_path: Path) -> None:
    log = tmp_path / "training.log"
    screen = Screen()
    clock = iter(range(0, 1000, 65)).__next__
    live = LiveOutput([("algo-1", log)], tmp_path, write=screen.write, terminal=True, interval=60,
                      clock=lambda: float(clock()), width=lambda: 200)
    state = JobState(("VanishingGradient", "LossNotDecreasing"))

    class Lifecycle:
        pass

    lifecycle = Lifecycle()
    lifecycle.state = state  # type: ignore[attr-defined]
    live.attach(lifecycle)
    state.phase("Training", "Training in progress")
    state.rule("LossNotDecreasing", RuleStatus.ISSUES_FOUND, "fired")
    TrialWriter(tmp_path).write_step(7, "TRAIN", 7, [("loss", np.float32(1.0))])
    log.write_text("step 7 loss 0.5\n")
    live.echo("Rule LossNotDecreasing: IssuesFound")
    status = "Training | step 7 | 1 step saved | 1:05 elapsed | rules: 1 InProgress, 1 IssuesFound"
    assert screen.text == f"step 7 loss 0.5\nRule LossNotDecreasing: IssuesFound\n{status}"
    live.echo("Training completed")
    live.finish()
    assert screen.text == (f"step 7 loss 0.5\nRule LossNotDecreasing: IssuesFound\n{status}{CLEAR_LINE}"
                           f"Training completed\n{status.replace('1:05', '2:10')}{CLEAR_LINE}")


def _env(home: Path, moto_server: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SDLOCAL_"))}
    env.update({"SDLOCAL_HOME": str(home), "SDLOCAL_RUNTIME": "process", "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1", "COLUMNS": "200"})
    return env


@pytest.mark.slow
def test_run_on_a_terminal_shows_the_training_lines_and_a_status_line(tmp_path: Path, moto_server: str) -> None:
    job = f"live-{uuid.uuid4().hex[:8]}"
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "sdlocal", "run", "examples/job.yaml", "--job-name", job,
                             "-p", "steps=30", "--s3-endpoint-url", moto_server],
                            cwd=REPO, env=_env(tmp_path / "home", moto_server), stdin=slave, stdout=slave,
                            stderr=slave, close_fds=True)
    os.close(slave)
    screen = b""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # the pty closed: the command ended
                break
            if not data:
                break
            screen += data
        elif proc.poll() is not None:
            break
    os.close(master)
    assert proc.wait(30) == 0, screen.decode(errors="replace")[-3000:]
    text = screen.decode(errors="replace")
    # the script's lines, as it wrote them, before the launcher says the training completed
    assert text.index("step 0 loss") < text.index("step 20 loss") < text.index("Training completed")
    # the status line was drawn (and the lines after it replaced it)
    assert "steps saved | " in text and " elapsed | rules: " in text and "3 InProgress" in text
    assert f"{CLEAR_LINE}Training completed" in text
    assert "LossNotDecreasing" in text.split("Training completed", 1)[1]  # the statuses, after


@pytest.mark.slow
def test_quiet_run_shows_no_training_line_and_logs_follow_prints_them_until_the_end(
        tmp_path: Path, moto_server: str) -> None:
    job = f"quiet-{uuid.uuid4().hex[:8]}"
    code = tmp_path / "code"
    code.mkdir()
    (code / "tick.py").write_text("import time\nfor i in range(6):\n    print(f'tick {i}', flush=True)\n"
                                  "    time.sleep(0.5)\nprint('no newline at the end', end='')\n")
    home = tmp_path / "home"
    env = _env(home, moto_server)
    run = subprocess.Popen([sys.executable, "-m", "sdlocal", "run", "--entry-point", "tick.py", "--source-dir",
                            str(code), "--job-name", job, "--quiet", "--s3-endpoint-url", moto_server],
                           cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    entry = home / "running" / f"{job}.json"
    deadline = time.monotonic() + 60
    while not entry.exists() and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    follow = subprocess.run([sys.executable, "-m", "sdlocal", "logs", "-f", job], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    out, err = run.communicate(timeout=120)
    assert run.returncode == 0, err
    assert follow.returncode == 0, follow.stderr
    # -f ran while the job ran and returned once it ended, with every line
    assert follow.stdout.splitlines() == [f"tick {i}" for i in range(6)] + ["no newline at the end"]
    assert "Training completed" in err and "tick" not in err and "elapsed" not in err
