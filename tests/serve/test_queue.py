"""launcher/serve/queue.py: at most `limit` jobs run, the others wait in order and are told their
place; a waiting job that is stopped leaves the queue. And through a real in-process server: a job
beyond the limit reads InProgress/Starting with the waiting message, and StopTrainingJob ends it
Stopped at once without running it."""
from __future__ import annotations

import io
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sdlocal.launcher.serve.app import ServeServer
from sdlocal.launcher.serve.queue import JobQueue, default_limit
from tests.serve.test_api import client, request, wait_status


class Job:
    def __init__(self, name: str, launched: list[str]) -> None:
        self.name = name
        self.launched = launched
        self.message = ""

    def launch(self) -> None:
        self.launched.append(self.name)

    def waiting(self, message: str) -> None:
        self.message = message


def test_jobs_beyond_the_limit_wait_in_order_and_are_told_their_place() -> None:
    launched: list[str] = []
    queue = JobQueue(2)
    jobs = [Job(f"j{i}", launched) for i in range(5)]
    for job in jobs:
        queue.submit(job)
    assert launched == ["j0", "j1"] and queue.counts == (2, 3)
    assert jobs[2].message.startswith("Waiting for capacity: next to start; sdlocal serve runs at most 2 job(s)")
    assert jobs[4].message.startswith("Waiting for capacity: 2 job(s) ahead of it;")
    queue.done(jobs[1])
    assert launched == ["j0", "j1", "j2"]
    assert jobs[3].message.startswith("Waiting for capacity: next to start;")
    assert queue.withdraw(jobs[3]) and not queue.withdraw(jobs[0])  # j0 runs: not waiting
    assert jobs[4].message.startswith("Waiting for capacity: next to start;")
    queue.done(jobs[0])
    queue.done(jobs[2])
    assert launched == ["j0", "j1", "j2", "j4"] and queue.counts == (1, 0)
    assert 1 <= default_limit()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServeServer]:
    srv = ServeServer(tmp_path / "home", port=0, runtime="process", echo=lambda line: None, max_concurrent_jobs=1)
    srv.start()
    try:
        yield srv
    finally:
        assert srv.stop(timeout=60) == []


def test_a_waiting_job_says_so_and_a_stop_ends_it_without_running_it(server: ServeServer) -> None:
    script = "import time\ntime.sleep(4)\n"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("train.py")
        info.size = len(script)
        tar.addfile(info, io.BytesIO(script.encode()))
    s3, sm = client(server, "s3"), client(server)
    for name in ("first", "second"):
        s3.put_object(Bucket="sdlocal", Key=f"{name}/source/sourcedir.tar.gz", Body=buf.getvalue())
        sm.create_training_job(**request(name))
    waiting = sm.describe_training_job(TrainingJobName="second")
    assert (waiting["TrainingJobStatus"], waiting["SecondaryStatus"]) == ("InProgress", "Starting")
    assert waiting["SecondaryStatusTransitions"][-1]["StatusMessage"].startswith(
        "Waiting for capacity: next to start; sdlocal serve runs at most 1 job(s) at once")
    began = time.monotonic()
    sm.stop_training_job(TrainingJobName="second")
    stopped = sm.describe_training_job(TrainingJobName="second")
    assert stopped["TrainingJobStatus"] == "Stopped" and time.monotonic() - began < 2
    assert "TrainingStartTime" not in stopped
    assert not (server.home / "jobs" / "second").exists()  # it never ran
    assert wait_status(sm, "first")["TrainingJobStatus"] == "Completed"
