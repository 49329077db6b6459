"""A job's training on its hosts: one launch per host (`host_launches`), started together
(`start_hosts`) and seen by the job as one `Handle` (`HostGroup`).

SageMaker runs a job of ResourceConfig.InstanceCount N on hosts algo-1..algo-N, each with its own
/opt/ml and the training toolkit's view of the cluster (launcher/jobdir/training_env.py), each
launching what the job's distribution asks (launcher/spec/distribution.py): one process, or
torchrun with `--nnodes N --node_rank K`. When one host's training fails the job fails with that
host's reason and the others are stopped; a stop stops every host.

A job of one host is started exactly as before: its one launch, its runtime's own handle.
"""
from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from sdlocal.launcher.job.error_lines import error_message, has_error_line
from sdlocal.launcher.jobdir.folder import JobDir
from sdlocal.launcher.jobdir.training_env import training_environment
from sdlocal.launcher.runtime.base import (
    DataInput,
    ExitInfo,
    Handle,
    MpiLayout,
    RankLayout,
    Runtime,
    TrainingLaunch,
)
from sdlocal.launcher.sampler.sampler import SystemSampler, start_sampler
from sdlocal.launcher.spec.distribution import MPI
from sdlocal.launcher.upload.uploader import UploadTarget
from sdlocal.trial.storage import Storage

if TYPE_CHECKING:
    from sdlocal.launcher.job.launches import Env
    from sdlocal.launcher.spec.model import JobSpec


def upload_targets(spec: JobSpec, job_dir: JobDir, storage: Callable[[str], Storage],
                   profiling: bool) -> list[UploadTarget]:
    """Every host's local outputs, each to the job's one prefix (debug-output, tensorboard-output,
    profiler-output): the names of what the hosts write never collide (smdebug's files carry the
    worker, `worker_<rank>`; system metrics the host, `<epoch>.algo-2.json`; traces the rank and
    host, `<time>_<rank>-algo-2_pythontimeline.json`)."""
    targets = []
    for host in spec.hosts:
        folder = job_dir.host_dir(host)
        targets.append(UploadTarget(folder.tensors, storage(spec.debug_output)))
        if spec.tensorboard is not None:
            targets.append(UploadTarget(folder.tensorboard, storage(spec.tensorboard.tensorboard_output), mutable=True))
        if profiling:
            targets.append(UploadTarget(folder.profiler, storage(spec.profiler_output)))
    return targets


class HostSamplers:
    """The system samplers of every host (NodeId algo-1, algo-2, ...): each stopped when its host's
    training exited (a container that is gone has nothing to sample), all at `stop()`."""

    def __init__(self, samplers: Sequence[tuple[Handle, SystemSampler]], interval: float = 0.1) -> None:
        self.samplers = list(samplers)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, args=(interval,), name="sdlocal-host-samplers",
                                        daemon=True)
        self._thread.start()

    def _watch(self, interval: float) -> None:
        running = list(self.samplers)
        while running and not self._done.wait(interval):
            for handle, sampler in list(running):
                if handle.poll() is not None:
                    sampler.stop()
                    running.remove((handle, sampler))

    def stop(self) -> None:
        self._done.set()
        self._thread.join(10.0)
        for _, sampler in self.samplers:
            sampler.stop()  # idempotent


def start_samplers(factory: Callable[..., SystemSampler], training: Handle, spec: JobSpec, job_dir: JobDir,
                   echo: Callable[[str], None]) -> SystemSampler | HostSamplers | None:
    """One host: its sampler as before. Several: one per host, each writing its host's NodeId into
    its host's profiler folder (a container's own figures under docker; under the process runtime
    every host is this machine, so each host's figures are this machine's)."""
    assert spec.profiler is not None
    interval, output = spec.profiler.interval_ms, spec.profiler_output
    if not spec.multi_host:
        return start_sampler(factory, training, job_dir.profiler, interval, output, echo)
    # mpi: one mpirun for every host (all of them this machine)
    handles = training.hosts if isinstance(training, HostGroup) else dict.fromkeys(spec.hosts, training)
    samplers = [(handle, start_sampler(factory, handle, job_dir.host_dir(host).profiler, interval, output, echo,
                                       node_id=host)) for host, handle in handles.items()]
    return HostSamplers([(handle, sampler) for handle, sampler in samplers if sampler is not None])


def rank_layout(spec: JobSpec, host: str) -> RankLayout | None:
    """torchrun's share of `host` (torch_distributed, pytorchddp), else None (one process)."""
    if not spec.distribution.uses_torchrun:
        return None
    return RankLayout(len(spec.hosts), spec.distribution.processes_per_host, spec.hosts.index(host))


def host_launches(spec: JobSpec, job_dir: JobDir, env: Env,
                  data_inputs: Mapping[str, tuple[DataInput, ...]]) -> list[TrainingLaunch]:
    """One launch per host, each with its /opt/ml (JobDir.host_dir), its log and its view."""
    launches = []
    for host in spec.hosts:
        folder = job_dir.host_dir(host)
        launches.append(TrainingLaunch(
            job_name=spec.job_name, entry_point=spec.entry_point, source_dir=spec.source_dir,
            hyperparameters=tuple(spec.hyperparameters.items()), config_dir=folder.config_dir,
            model_dir=folder.model, log_path=job_dir.training_log(host), image=spec.training_image, env=env,
            training_env=training_environment(spec, host), environment=tuple(spec.environment.items()),
            data_inputs=data_inputs.get(host, ()), network_isolation=spec.containers.network_isolation,
            ranks=rank_layout(spec, host), mpi=mpi_layout(spec), algorithm=spec.algorithm, command=spec.command,
        ))
    return launches


def mpi_layout(spec: JobSpec) -> MpiLayout | None:
    d = spec.distribution
    return MpiLayout(d.processes_per_host, d.num_processes, d.mpi_options) if d.kind == MPI else None


def start_hosts(runtime: Runtime, launches: Sequence[TrainingLaunch], *, grace: float) -> Handle:
    """Every host's training started; one host: its runtime's handle as it is. A host that cannot
    start stops those started before it. Distribution mpi: mpirun on the first host, across all."""
    if launches[0].mpi is not None:
        return runtime.start_mpi(launches)
    if len(launches) == 1:
        return runtime.start_training(launches[0])
    started: list[Handle] = []
    try:
        for launch in launches:
            started.append(runtime.start_training(launch))
    except BaseException:
        _stop_all(started, grace)
        raise
    return HostGroup(started, [launch.host for launch in launches], grace=grace)


def _stop_all(handles: Sequence[Handle], grace: float) -> None:
    """Stop every handle at once (each may take `grace` seconds)."""
    threads = [threading.Thread(target=h.stop, args=(grace,), name=f"stop {h.name}", daemon=True)
               for h in handles if h.poll() is None]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(grace + 60.0)


# torchrun's summary of a failed launch: "Root Cause (first observed failure):" then these fields
_ROOT_CAUSE = "Root Cause (first observed failure):"
_FIELD = re.compile(r"^\s*(time|host|rank|exitcode)\s*:\s*(.+?)\s*$")
# what a rank says when it failed because a peer went away or the host was stopped: a consequence
_CONSEQUENCE = re.compile(r"Connection (closed|reset) by peer|Broken pipe|got signal: 15|exitcode\s*:\s*(-15|143)\b")


def torchrun_root_cause(lines: Sequence[str]) -> dict[str, str] | None:
    """The fields of torchrun's last "Root Cause" entry in a log (time, rank, exitcode), or None."""
    starts = [i for i, line in enumerate(lines) if _ROOT_CAUSE in line]
    if not starts:
        return None
    fields: dict[str, str] = {}
    for line in lines[starts[-1] + 1:starts[-1] + 12]:
        m = _FIELD.match(line)
        if m:
            fields.setdefault(m.group(1), m.group(2))
        elif line.strip().startswith("=") and fields:
            break
    return fields or None


def _rank_of(cause: Mapping[str, str]) -> str | None:
    """"3" of torchrun's "rank : 3 (local_rank: 1)"."""
    m = re.match(r"\d+", cause.get("rank", ""))
    return m.group(0) if m else None


def rank_lines(lines: Sequence[str], rank: str | None) -> list[str]:
    """The lines torch marks as that rank's (`[rank3]: ...`: its errors)."""
    prefix = f"[rank{rank}]:"
    return [line for line in lines if line.startswith(prefix)] if rank is not None else []


def _reads_as_consequence(lines: Sequence[str], cause: Mapping[str, str] | None) -> bool:
    """A failure caused by another's: its rank lost a peer, or was stopped (SIGTERM)."""
    if cause is None:
        return any(_CONSEQUENCE.search(line) for line in lines)
    own = rank_lines(lines, _rank_of(cause))
    return bool(re.match(r"(-15|143)\b", cause.get("exitcode", ""))) or any(_CONSEQUENCE.search(x) for x in own)


def _failure_time(fields: Mapping[str, str] | None) -> float | None:
    try:
        return datetime.fromisoformat(fields["time"].replace("_", " ")).timestamp() if fields else None
    except (KeyError, ValueError):
        return None


class HostGroup(Handle):
    """Every host's training as one handle. It runs while a host runs; the first host that fails
    (exit code other than 0) fails it, and the others are stopped at once. Which host failed
    first (a rank that dies takes its peers down with it a moment later): of the failed hosts,
    one whose log does not read as a consequence (a peer's connection lost, SIGTERM), then the
    earliest of torchrun's "first observed failure" times (to the second), then the first seen
    exited. `failed_host` names it; the failure's log and exit are that host's."""

    def __init__(self, handles: Sequence[Handle], hosts: Sequence[str], *, grace: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(f"training ({len(handles)} hosts)", handles[0].log_path, dict(handles[0].labels))
        self.hosts = dict(zip(hosts, handles, strict=True))
        self.grace = grace
        self.clock = clock
        self.in_container = handles[0].in_container
        self._first_failed: str | None = None
        self._seen_failed: list[str] = []  # in the order their exits were seen
        self._failed: str | None = None  # settled once every host exited
        self._stopped: set[str] = set()  # the hosts stopped because another failed
        self._stopper: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def failed_host(self) -> str | None:
        return self._failed or self._first_failed

    def _failed_handle(self) -> Handle:
        return self.hosts[self.failed_host] if self.failed_host else next(iter(self.hosts.values()))

    def poll(self) -> int | None:
        codes = {host: handle.poll() for host, handle in self.hosts.items()}
        with self._lock:
            self._seen_failed += [h for h, code in codes.items() if code not in (None, 0) and h not in self._seen_failed]
            if self._first_failed is None and self._seen_failed:
                self._first_failed = self._seen_failed[0]
                self._stop_the_others()
            if any(code is None for code in codes.values()):
                return None
            if self._first_failed is not None and self._failed is None:
                self._failed = self._root_cause()
        if self._failed is None:
            return 0
        code = codes[self._failed]
        if self._failed in self._stopped and _killed(code):
            # the failing rank's host was still winding down when another host's failure stopped it:
            # its own exit is that stop's; the job's is a failed host's own (torchrun: 1), as on SageMaker
            own = [c for h, c in codes.items() if h not in self._stopped and c not in (None, 0) and not _killed(c)]
            code = own[0] if own else 1
        return code

    def _root_cause(self) -> str:
        def key(host: str) -> tuple[bool, float, int]:
            lines = self.hosts[host].last_log_lines(400)
            cause = torchrun_root_cause(lines)
            when = _failure_time(cause)
            return (_reads_as_consequence(lines, cause), when if when is not None else float("inf"),
                    self._seen_failed.index(host))

        return min(self._seen_failed, key=key)

    def _stop_the_others(self) -> None:
        self._stopped = {host for host, h in self.hosts.items() if h.poll() is None}
        running = [self.hosts[host] for host in self._stopped]
        self._stopper = threading.Thread(target=_stop_all, args=(running, self.grace), name="stop hosts",
                                         daemon=True)
        self._stopper.start()

    def wait(self, timeout: float) -> int | None:
        """Until every host exited (a failure stops the others meanwhile) or `timeout` passed."""
        deadline = self.clock() + max(timeout, 0.0)
        while True:
            code = self.poll()
            left = deadline - self.clock()
            if code is not None or left <= 0:
                return code
            running = [h for h in self.hosts.values() if h.poll() is None]
            if running:
                running[0].wait(min(left, 0.2))

    def stop(self, grace: float) -> int | None:
        _stop_all(list(self.hosts.values()), grace)
        if self._stopper is not None:
            self._stopper.join(grace + 60.0)
        return self.poll()

    def exit_info(self) -> ExitInfo | None:
        return self._failed_handle().exit_info() if self.poll() is not None else None

    def container_pid(self) -> int | None:
        return next(iter(self.hosts.values())).container_pid()

    def logs(self) -> str:
        return self._failed_handle().logs()

    def last_log_lines(self, n: int = 10) -> list[str]:
        return self._failed_handle().last_log_lines(n)


def _killed(code: int | None) -> bool:
    """An exit by SIGTERM or SIGKILL: a process's (negative) or a container's (128 + signal)."""
    return code is not None and (code < 0 or code in (128 + 15, 128 + 9))


@dataclass(frozen=True)
class HostFailure:
    """What a failed training's FailureReason is made of: the host, its log's last lines, and for
    torchrun the ErrorMessage naming the rank that failed and the command run (else None: the
    toolkit's defaults)."""

    host: str
    log_lines: list[str]
    message: str | None = None
    command: list[str] | None = None


def host_failure(spec: JobSpec, training: Handle | None, lines: int = 400) -> HostFailure:
    """The failure of `training` (a HostGroup: its failed host's)."""
    host = getattr(training, "failed_host", None) or spec.hosts[0]
    log = training.last_log_lines(lines) if training is not None else []
    if spec.distribution.kind == MPI:
        return _mpi_failure(spec, log)
    layout = rank_layout(spec, host)
    if layout is None:
        message = f"{error_message(log)} (host {host})" if spec.multi_host and log else None
        return HostFailure(host, log, message)
    command = ["torchrun", "--nnodes", str(layout.nnodes), "--nproc_per_node", str(layout.nproc_per_node or "<GPUs>"),
               "--node_rank", str(layout.node_rank), spec.entry_point,
               *training_environment(spec, host).user_args()]
    cause = torchrun_root_cause(log)
    if cause is None:
        return HostFailure(host, log, f"{error_message(log)} (host {host})" if log else None, command)
    own_lines = rank_lines(log, _rank_of(cause))
    own = error_message(own_lines) if has_error_line(own_lines) else ""
    code = (cause.get("exitcode", "?").split() or ["?"])[0]
    where = f"rank {cause.get('rank', '?')} on {host} exited with exitcode {code}"
    return HostFailure(host, log, f"{own} ({where})" if own else where, command)


_MPI_PROCESS = re.compile(r"Process name:\s*\[\[\d+,\d+\],(\d+)\]")
_MPI_EXIT = re.compile(r"Exit code:\s*(-?\d+)")


def _mpi_failure(spec: JobSpec, log: list[str]) -> HostFailure:
    """mpirun's "The first process to do so was: Process name: [[J,1],R] Exit code: C": rank R's
    host (`-map-by slot`), its own error line (`--tag-output`: `[1,R]<stderr>:...`)."""
    from sdlocal.launcher.runtime.mpi import rank_host

    text = "\n".join(log)
    rank, code = _MPI_PROCESS.search(text), _MPI_EXIT.search(text)
    command = ["mpirun", "--host", ",".join(spec.hosts), "python", spec.entry_point,
               *training_environment(spec).user_args()]
    if rank is None:
        return HostFailure(spec.hosts[0], log, None, command)
    per_host = spec.distribution.processes_per_host or 1
    host = rank_host(int(rank.group(1)), spec.hosts, per_host)
    own = [line.split(">:", 1)[1] for line in log if line.startswith(f"[1,{rank.group(1)}]<") and ">:" in line]
    where = f"rank {rank.group(1)} on {host} exited with exit code {code.group(1) if code else '?'}"
    message = f"{error_message(own)} ({where})" if has_error_line(own) else where
    return HostFailure(host, log, message, command)
