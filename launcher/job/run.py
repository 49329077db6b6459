"""Running a job: training and one evaluator per rule at the same time, the uploads, the end
markers, waiting for the evaluators, statuses for evaluators that could not write their own.
The run itself is `sdlocal.launcher.job.lifecycle.JobLifecycle`; `run_job` is its one-call form.

Stopping (Ctrl-C, SIGTERM, `stop` event): training and evaluators are stopped (SIGTERM, then
SIGKILL after the grace period), the end marker is written, rules that had not finished are
marked `Stopped`; no process is left behind.

A rule's StopTraining action (launcher/job/stop_training.py) stops only the training: the job ends
`Stopped` (`JobResult.stopped_by_rule`, not a failure), the end marker is written and the rules
finish their evaluation (the rule that fired ends IssuesFound). A training that runs past
`RunOptions.max_runtime_s` (SageMaker's MaxRuntimeInSeconds, one day by default) is stopped the
same way (`JobResult.max_runtime_exceeded`).

Around the training, as SageMaker does: the source tarball and the channels are staged before it
starts (launcher/job/staging.py); a training that completed or was stopped has its model and output
data published, a failed one gets a FailureReason (launcher/job/artifacts.py).
"""
from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from sdlocal.launcher.job.lifecycle import JobLifecycle
from sdlocal.launcher.job.model import DEFAULT_OPTIONS, JobResult, RunOptions
from sdlocal.launcher.jobdir.folder import JobDir
from sdlocal.launcher.runtime import Runtime
from sdlocal.launcher.s3.endpoint import S3Endpoint
from sdlocal.launcher.spec.model import JobSpec

__all__ = ["JobLifecycle", "JobResult", "RunOptions", "run_job", "stop_on_signals"]


@contextlib.contextmanager
def stop_on_signals(event: threading.Event) -> Iterator[None]:
    """SIGINT/SIGTERM set `event` (the job loop stops everything cleanly) instead of raising."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, lambda *_: event.set())
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_job(
    spec: JobSpec,
    *,
    job_dir: JobDir,
    endpoint: S3Endpoint,
    runtime: Runtime,
    options: RunOptions = DEFAULT_OPTIONS,
    echo: Callable[[str], None] = print,
    stop: threading.Event | None = None,
    client: Any = None,
    clock: Callable[[], float] = time.monotonic,
    **parts: Any,
) -> JobResult:
    """Run the job to its end (JobLifecycle.run); `parts`: JobLifecycle's other keywords."""
    return JobLifecycle(spec, job_dir=job_dir, endpoint=endpoint, runtime=runtime, options=options, echo=echo,
                        stop=stop, client=client, clock=clock, **parts).run()
