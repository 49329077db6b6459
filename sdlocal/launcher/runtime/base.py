"""Where training and rule evaluators run: the `Runtime` interface and its launch options.

A runtime turns a frozen launch description into a running `Handle`. `ProcessRuntime` runs
subprocesses on this host; `DockerRuntime` runs containers (launcher/runtime/docker.py).
"""
from __future__ import annotations

import abc
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sdlocal.launcher.errors import RuntimeLaunchError
from sdlocal.launcher.jobdir.training_env import TrainingEnvironment
from sdlocal.launcher.spec.algorithm import BuiltinAlgorithm, ContainerCommand


@dataclass(frozen=True)
class DataInput:
    """A channel's data as the training sees it: `rel` is its path under /opt/ml
    (`input/data/<channel>`, or `input/data/<channel>/<file>` for a one-file local channel),
    `host` the folder or file on this host (the docker runtime mounts it read-only there)."""

    rel: str
    host: Path


MASTER_PORT = 7777  # the PyTorch training toolkit's MASTER_PORT (torchrun's --master_port)


@dataclass(frozen=True)
class Rendezvous:
    """Where every host's ranks find rank 0 (MASTER_ADDR, MASTER_PORT): `algo-1:7777` on a
    network where hosts have their names (docker), a port of this machine's loopback otherwise."""

    addr: str
    port: int = MASTER_PORT


@dataclass(frozen=True)
class RankLayout:
    """One host's share of a torchrun launch (the toolkit's TorchDistributedRunner): `nnodes`
    hosts of `nproc_per_node` processes each (None: the host's GPUs, else 1, as the toolkit
    decides), this host the `node_rank`-th."""

    nnodes: int
    nproc_per_node: int | None
    node_rank: int

    def processes(self, num_gpus: int) -> int:
        return self.nproc_per_node if self.nproc_per_node is not None else max(num_gpus, 1)

    def torchrun_args(self, rendezvous: Rendezvous | None, num_gpus: int = 0) -> list[str]:
        """`--nnodes N --nproc_per_node P` [+ `--master_addr A --master_port P --node_rank K`]:
        the toolkit passes the last three for several hosts only; a launcher that shares this
        machine's loopback passes them always (torchrun's default port would be every job's)."""
        args = ["--nnodes", str(self.nnodes), "--nproc_per_node", str(self.processes(num_gpus))]
        if rendezvous is not None:
            args += ["--master_addr", rendezvous.addr, "--master_port", str(rendezvous.port),
                     "--node_rank", str(self.node_rank)]
        return args


@dataclass(frozen=True)
class MpiLayout:
    """mpirun across every host, started on the first (the toolkit's MPI MasterRunner): `-np`
    `num_processes` (default: processes per host x hosts), `processes_per_host` (None: the host's
    GPUs, else 1), the SDK's custom_mpi_options."""

    processes_per_host: int | None
    num_processes: int | None = None
    options: str = ""


@dataclass(frozen=True)
class TrainingLaunch:
    job_name: str
    entry_point: str  # relative to source_dir
    source_dir: Path
    hyperparameters: tuple[tuple[str, str], ...]  # used when no training_env is given
    config_dir: Path  # input/config with debughookconfig.json etc.; the job root (/opt/ml) is two levels up
    model_dir: Path
    log_path: Path
    image: str | None = None  # AlgorithmSpecification.TrainingImage (docker runtime)
    env: tuple[tuple[str, str], ...] = ()  # extra environment (S3 endpoint, credentials)
    training_env: TrainingEnvironment | None = None  # what the SageMaker training toolkit tells the script
    environment: tuple[tuple[str, str], ...] = ()  # the request's Environment
    data_inputs: tuple[DataInput, ...] = ()
    network_isolation: bool = False  # EnableNetworkIsolation: no network at all for the training
    algorithm: BuiltinAlgorithm | None = None  # SageMaker's XGBoost algorithm instead of a script
    command: ContainerCommand | None = None  # the request's ContainerEntrypoint + ContainerArguments
    ranks: RankLayout | None = None  # torchrun on this host (torch_distributed, pytorchddp), else one process
    mpi: MpiLayout | None = None  # mpirun from the first host across all (Runtime.start_mpi)

    @property
    def job_root(self) -> Path:
        """The process runtime's /opt/ml."""
        return self.config_dir.parent.parent

    @property
    def host(self) -> str:
        return self.toolkit_env().current_host

    @property
    def hosts(self) -> tuple[str, ...]:
        return self.toolkit_env().hosts

    @property
    def distributed(self) -> bool:
        """Several hosts or several processes: the platform's distributed variables are set."""
        return len(self.hosts) > 1 or self.ranks is not None or self.mpi is not None

    def toolkit_env(self) -> TrainingEnvironment:
        return self.training_env or TrainingEnvironment(self.job_name, self.entry_point, self.hyperparameters)

    def argv(self, python: str = sys.executable, rendezvous: Rendezvous | None = None,
             num_gpus: int = 0) -> list[str]:
        """What the training runs: the script under the zero-code hook, with the hyperparameters as the
        SageMaker training toolkit passes them (`--key value`, sorted), with `ranks` behind torch's
        launcher (`python -m torch.distributed.run`: the `torchrun` the toolkit runs, whether or not
        the image has the script), which runs the hook's runner in each of its processes; the built-in
        algorithm; or the request's container command as given (paths of the container's /opt/ml)."""
        if self.algorithm is not None:
            return self.algorithm.argv(python)
        if self.command is not None:
            return self.command.argv()
        run = [self.entry_point, *self.toolkit_env().user_args()]
        if self.ranks is None:
            return [python, "-m", "sdlocal.hook.run", *run]
        return [python, "-m", "torch.distributed.run", *self.ranks.torchrun_args(rendezvous, num_gpus),
                "--module", "sdlocal.hook.run", *run]

    def container_env(self, opt_ml: str | None = None, code_dir: str | None = None, num_gpus: int = 0,
                      rendezvous: Rendezvous | None = None, interface: str = "eth0",
                      num_cpus: int | None = None) -> dict[str, str]:
        """The training's environment. `opt_ml`/`code_dir`: the paths the script sees (default: this
        host's job folder and source folder, as the process runtime runs it). A distributed launch
        also gets what the PyTorch training toolkit sets (MASTER_ADDR/PORT of `rendezvous`, NCCL's
        interface `interface`)."""
        env = dict(self.environment)  # the request's Environment; SageMaker's own variables win over it
        env.update(self.toolkit_env().to_env(opt_ml or str(self.job_root), code_dir=code_dir or str(self.source_dir),
                                             num_gpus=num_gpus, num_cpus=num_cpus))
        env.update({"TRAINING_JOB_NAME": self.job_name, "PYTHONUNBUFFERED": "1"})
        if self.distributed:
            master = rendezvous or Rendezvous(self.toolkit_env().master_host)
            env.update({"MASTER_ADDR": master.addr, "MASTER_PORT": str(master.port), "NCCL_SOCKET_IFNAME": interface,
                        "NCCL_IB_DISABLE": "1", "NCCL_DEBUG": "WARN"})
        for name, var in (("debughookconfig", "SMDEBUG_CONFIG_FILE_PATH"),
                          ("profilerconfig", "SMPROFILER_CONFIG_PATH"),
                          ("tensorboardoutputconfig", "TENSORBOARD_CONFIG_FILE_PATH")):
            path = self.config_dir / f"{name}.json"
            if path.exists():
                env[var] = str(path)
        env.update(dict(self.env))
        return env

    def to_process_kwargs(self, python: str = sys.executable, num_gpus: int = 0,
                          rendezvous: Rendezvous | None = None) -> dict[str, Any]:
        env = self.container_env(num_gpus=num_gpus, rendezvous=rendezvous, interface="lo")
        if self.distributed:
            env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # the hosts of this machine meet on its loopback
        return {"args": self.argv(python, rendezvous, num_gpus), "cwd": str(self.source_dir), "env": env}


@dataclass(frozen=True)
class RuleLaunch:
    """One evaluator for one rule; `to_env()` is the evaluator's environment contract (design.md)."""

    job_name: str
    rule_name: str
    rule_parameters: tuple[tuple[str, str], ...]
    debug_output: str
    rule_output: str
    log_path: Path
    profiler_output: str | None = None
    poll_interval_s: float | None = None
    deadline_s: float | None = None
    collections_timeout_s: float | None = None
    image: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    instance_type: str | None = None  # RuleConfiguration.InstanceType (docker runtime: container limits)
    rule_timeout_s: float | None = None  # one call of the rule's code (evaluator/watchdog.py)

    def to_env(self) -> dict[str, str]:
        from sdlocal.evaluator.contract import contract_environ

        env = contract_environ(
            job_name=self.job_name, rule_configuration_name=self.rule_name,
            rule_parameters=dict(self.rule_parameters), debug_output=self.debug_output,
            rule_output=self.rule_output, profiler_output=self.profiler_output,
            poll_interval_s=self.poll_interval_s, deadline_s=self.deadline_s,
            collections_timeout_s=self.collections_timeout_s, rule_timeout_s=self.rule_timeout_s)
        env["PYTHONUNBUFFERED"] = "1"
        env.update(dict(self.env))
        return env

    def to_process_kwargs(self, python: str = sys.executable) -> dict[str, Any]:
        return {"args": [python, "-m", "sdlocal.evaluator"], "cwd": str(self.log_path.parent), "env": self.to_env()}


def _size(n: int) -> str:
    for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= size:
            return f"{n / size:.4g} {unit}"
    return f"{n} bytes"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


@dataclass(frozen=True)
class ExitInfo:
    """How a training or evaluator ended, as far as its runtime can tell.

    `code`: the exit status as the runtime reports it (a process killed by signal N: -N; a
    container: its main process's, 128+N for signal N). `oom_killed`: the engine says the
    container's memory cgroup killed it (docker's State.OOMKilled); a host process killed by the
    kernel's OOM killer is only known to have got SIGKILL, so it reads "killed by signal 9"."""

    code: int
    signal: int | None = None
    oom_killed: bool = False
    memory_limit_bytes: int | None = None

    @classmethod
    def of_process(cls, returncode: int) -> ExitInfo:
        return cls(returncode, -returncode if returncode < 0 else None)

    @classmethod
    def of_container(cls, code: int, oom_killed: bool = False, memory_limit_bytes: int | None = None) -> ExitInfo:
        return cls(code, code - 128 if 128 < code < 160 else None, oom_killed, memory_limit_bytes or None)

    def describe(self) -> str:
        """'exited (code 1)', 'was killed by signal 9 (SIGKILL)', 'was OOM-killed (code 137: ...)'."""
        if self.oom_killed:
            limit = f" of {_size(self.memory_limit_bytes)}" if self.memory_limit_bytes else ""
            return f"was OOM-killed (code {self.code}: over its memory limit{limit})"
        if self.signal is not None and self.code < 0:
            return f"was killed by signal {self.signal} ({_signal_name(self.signal)})"
        if self.signal is not None:
            return f"exited (code {self.code}: killed by signal {self.signal}, {_signal_name(self.signal)})"
        return f"exited (code {self.code})"


@dataclass
class Handle(abc.ABC):
    """A started training or evaluator. Every wait has a deadline."""

    name: str
    log_path: Path
    labels: Mapping[str, str] = field(default_factory=dict)
    in_container = False  # a container (its own cgroup, no GPU of the host) rather than a host process

    @abc.abstractmethod
    def poll(self) -> int | None:
        """The exit code, or None while it runs."""

    @abc.abstractmethod
    def wait(self, timeout: float) -> int | None:
        """Wait at most `timeout` seconds; the exit code, or None if still running."""

    @abc.abstractmethod
    def stop(self, grace: float) -> int | None:
        """Ask it to stop (SIGTERM), kill it after `grace` seconds; the exit code."""

    def exit_info(self) -> ExitInfo | None:
        """How it ended (None while it runs)."""
        code = self.poll()
        return None if code is None else ExitInfo.of_process(code)

    def container_pid(self) -> int | None:
        """The host pid of the container's main process while it runs (the system sampler reads its
        cgroup); None for a process of this host, whose figures are the host's."""
        return None

    def logs(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def last_log_lines(self, n: int = 10) -> list[str]:
        return [line for line in self.logs().splitlines() if line.strip()][-n:]


class Runtime(abc.ABC):
    isolates_network = False  # can run the training with no network at all (EnableNetworkIsolation)

    @abc.abstractmethod
    def start_training(self, launch: TrainingLaunch) -> Handle: ...

    @abc.abstractmethod
    def start_rule(self, launch: RuleLaunch) -> Handle: ...

    def start_mpi(self, launches: Sequence[TrainingLaunch]) -> Handle:
        """mpirun on the first host of `launches` across them all (distribution mpi)."""
        raise RuntimeLaunchError(f"distribution mpi: {type(self).__name__} does not run mpirun")

    def close(self) -> None:  # noqa: B027 - optional: only runtimes that hold resources override it
        """Release what the runtime holds (containers, networks) once the job ended; idempotent."""
