"""Running a job: the one path that `sdlocal run` and `sdlocal serve` share.

`run_job` registers the job as running (`$SDLOCAL_HOME/running/<job>.json`, launcher/job/registry.py:
`sdlocal stop`, `logs` and `summary` find a job from either entry point the same way, and `stop`
never removes the containers of a job that is registered), watches its stop-request file (`sdlocal
stop`), runs its `JobLifecycle` (claim, stage, start, wait, end, publish, rules: its docstring) and,
whatever happens, stops watching, closes the runtime and unregisters.

Stopping (Ctrl-C, SIGTERM, `sdlocal stop`, StopTrainingJob: the `stop` event): training and
evaluators are stopped (SIGTERM, then SIGKILL after the grace period), the end marker is written,
rules that had not finished are marked `Stopped`; no process is left behind.

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
from pathlib import Path
from typing import Any

from sdlocal.launcher.job.lifecycle import JobLifecycle
from sdlocal.launcher.job.model import DEFAULT_OPTIONS, JobResult, RunOptions
from sdlocal.launcher.job.registry import StopFileWatcher, register, unregister
from sdlocal.launcher.jobdir.folder import JobDir
from sdlocal.launcher.runtime import Runtime
from sdlocal.launcher.s3.endpoint import S3Endpoint
from sdlocal.launcher.settings import sdlocal_home
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
    home: Path | None = None,
    on_lifecycle: Callable[[JobLifecycle], None] | None = None,
    **parts: Any,
) -> JobResult:
    """Run the job to its end, registered in `home` (default $SDLOCAL_HOME) while it runs.
    `on_lifecycle` is given the lifecycle before it starts (`serve` reads the rules' statuses
    through it); `parts`: JobLifecycle's other keywords."""
    home = home or sdlocal_home()
    stop = stop or threading.Event()
    lifecycle = JobLifecycle(spec, job_dir=job_dir, endpoint=endpoint, runtime=runtime, options=options, echo=echo,
                             stop=stop, client=client, clock=clock, **parts)
    if on_lifecycle is not None:
        on_lifecycle(lifecycle)
    watcher = StopFileWatcher(job_dir.root, stop)
    try:
        register(home, spec.job_name, job_dir.root)
        watcher.start()
        return lifecycle.run()
    finally:
        watcher.close()
        runtime.close()
        unregister(home, spec.job_name)
