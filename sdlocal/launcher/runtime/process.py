"""`ProcessRuntime`: training and evaluators as subprocesses of this host, each in its own process
group (so Ctrl-C reaches the launcher only, and stopping a job leaves no grandchild behind).

A job of several hosts runs one process group per host on this machine; they meet on its loopback
(MASTER_ADDR 127.0.0.1, a free port per job: `Rendezvous`). torchrun starts each of its processes
in a session of its own, out of the host's process group: such a launch carries a token in its
environment (`SDLOCAL_PROCESS_TOKEN`, inherited by every descendant) and stopping it also ends
every process of this user that carries it. This machine's GPUs are shared out among the hosts
(CUDA_VISIBLE_DEVICES) when there are at least as many as hosts.
"""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sdlocal.launcher.errors import RuntimeLaunchError
from sdlocal.launcher.jobdir.training_env import count_gpus
from sdlocal.launcher.runtime.base import Handle, Rendezvous, RuleLaunch, Runtime, TrainingLaunch
from sdlocal.launcher.settings import LABEL_HOST, LABEL_JOB, LABEL_ROLE, LABEL_RULE
from sdlocal.launcher.wait import Deadline, wait_for
from sdlocal.trial.smdebug_shim import compat_dir

TOKEN_ENV = "SDLOCAL_PROCESS_TOKEN"


def processes_with_token(token: str, proc_root: Path = Path("/proc")) -> list[int]:
    """The live processes (readable by this user) whose environment carries `token`."""
    marker = f"{TOKEN_ENV}={token}".encode()
    pids = []
    for entry in proc_root.iterdir() if proc_root.is_dir() else ():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


class ProcessHandle(Handle):
    def __init__(self, name: str, log_path: Path, proc: subprocess.Popen[bytes],
                 labels: Mapping[str, str] | None = None, token: str | None = None) -> None:
        super().__init__(name, log_path, dict(labels or {}))
        self.proc = proc
        self.token = token  # in the environment of every process it started (swept at stop)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def poll(self) -> int | None:
        return self.proc.poll()

    def wait(self, timeout: float) -> int | None:
        try:
            return self.proc.wait(timeout=max(timeout, 0.0))
        except subprocess.TimeoutExpired:
            return None

    def stop(self, grace: float) -> int | None:
        """SIGTERM to the whole group, SIGKILL after `grace`; then sweep the group for leftovers."""
        if self.proc.poll() is None:
            self._signal_group(signal.SIGTERM)
            if self.wait(grace) is None:
                self._signal_group(signal.SIGKILL)
                self.wait(10.0)
        self._signal_group(signal.SIGKILL)  # children the main process left running
        if self.token is not None:  # descendants in sessions of their own (torchrun's processes)
            for pid in processes_with_token(self.token):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        return self.proc.poll()

    def _signal_group(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)


class ProcessRuntime(Runtime):
    """`num_gpus`: SM_NUM_GPUS; None counts this host's GPUs (nvidia-smi) when training starts."""

    def __init__(self, python: str = sys.executable, base_env: Mapping[str, str] | None = None,
                 num_gpus: int | None = None) -> None:
        self.python = python
        self.base_env = dict(os.environ if base_env is None else base_env)
        self.num_gpus = num_gpus
        self._rendezvous: dict[str, Rendezvous] = {}  # per job: every host's ranks meet there

    def rendezvous(self, job_name: str) -> Rendezvous:
        """127.0.0.1 and a port free now, the same for every host of the job."""
        if job_name not in self._rendezvous:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("127.0.0.1", 0))
                self._rendezvous[job_name] = Rendezvous("127.0.0.1", int(s.getsockname()[1]))
        return self._rendezvous[job_name]

    def host_gpus(self, launch: TrainingLaunch) -> tuple[int, str | None]:
        """(SM_NUM_GPUS, CUDA_VISIBLE_DEVICES or None) of `launch`'s host: with several hosts and at
        least as many GPUs, each host its own share; else every GPU of this machine."""
        if self.num_gpus is None:
            self.num_gpus = count_gpus()
        hosts = launch.hosts
        if len(hosts) < 2 or self.num_gpus < len(hosts):
            return self.num_gpus, None
        share = self.num_gpus // len(hosts)
        first = hosts.index(launch.host) * share
        return share, ",".join(str(i) for i in range(first, first + share))

    def start_training(self, launch: TrainingLaunch) -> ProcessHandle:
        if launch.network_isolation:
            raise RuntimeLaunchError("EnableNetworkIsolation: a training process of this host cannot be cut off "
                                     "the network; use the docker runtime")
        num_gpus, visible = self.host_gpus(launch)
        rendezvous = self.rendezvous(launch.job_name) if launch.distributed else None
        kwargs = launch.to_process_kwargs(self.python, num_gpus=num_gpus, rendezvous=rendezvous)
        if visible is not None:
            kwargs["env"]["CUDA_VISIBLE_DEVICES"] = visible
        if launch.command is not None:
            kwargs = self._command_kwargs(launch, kwargs)
        kwargs["args"] = self._on_private_opt_ml(launch, kwargs["args"])
        token = None
        if launch.ranks is not None:
            token = kwargs["env"][TOKEN_ENV] = uuid.uuid4().hex
        name = f"training {launch.job_name}" + (f" {launch.host}" if len(launch.hosts) > 1 else "")
        handle = self._start(name, launch.log_path, kwargs,
                             {LABEL_JOB: launch.job_name, LABEL_ROLE: "training", LABEL_HOST: launch.host})
        handle.token = token
        return handle

    def start_mpi(self, launches: Sequence[TrainingLaunch]) -> ProcessHandle:
        """mpirun on the first host across every host of `launches` (launcher/runtime/mpi.py)."""
        from sdlocal.launcher.runtime import mpi

        mpirun = mpi.require_mpirun()
        master = launches[0]
        assert master.mpi is not None
        rendezvous = self.rendezvous(master.job_name)
        token = uuid.uuid4().hex
        envs: dict[str, tuple[dict[str, str], Path]] = {}
        for launch in launches:
            num_gpus, visible = self.host_gpus(launch)
            env = child_env({**self.base_env, **launch.to_process_kwargs(self.python, num_gpus=num_gpus,
                                                                         rendezvous=rendezvous)["env"]})
            env[TOKEN_ENV] = token
            if visible is not None:
                env["CUDA_VISIBLE_DEVICES"] = visible
            envs[launch.host] = (env, launch.log_path)
        folder = master.job_root / "hosts" / ".mpi"
        mpi.write_host_envs(folder, envs, master.host)
        per_host = mpi.processes_per_host(master.mpi, self.host_gpus(master)[0])
        agent = f"{self.python} -m sdlocal.launcher.runtime.mpi_agent"
        command = [self.python, "-m", "sdlocal.hook.run", master.entry_point, *master.toolkit_env().user_args()]
        argv = mpi.mpirun_argv(mpirun, master.hosts, per_host, master.mpi, agent, command)
        env = {**envs[master.host][0], mpi.HOSTS_ENV: str(folder)}
        handle = start_process(f"training {master.job_name} (mpirun)", master.log_path, argv,
                               cwd=str(master.source_dir), env=env,
                               labels={LABEL_JOB: master.job_name, LABEL_ROLE: "training", LABEL_HOST: master.host})
        handle.token = token
        return handle

    def _on_private_opt_ml(self, launch: TrainingLaunch, args: list[str]) -> list[str]:
        """`args` run with the host's job folder on /opt/ml where this machine allows it; else a job
        whose source names /opt/ml itself is refused (launcher/runtime/opt_ml_guard.py)."""
        from sdlocal.launcher.runtime import opt_ml_guard
        from sdlocal.launcher.settings import PRIVATE_OPT_ML, private_opt_ml

        problem = (opt_ml_guard.namespace_problem(self.python) if private_opt_ml(self.base_env)
                   else f"{PRIVATE_OPT_ML} is off")
        if problem is None:
            return opt_ml_guard.wrapped(self.python, launch.job_root, args)
        where = None if launch.command is not None else opt_ml_guard.direct_opt_ml_use(launch.source_dir,
                                                                                          launch.entry_point)
        if where is not None:
            raise RuntimeLaunchError(f"{where} names /opt/ml, and the process runtime cannot give this training "
                                     f"a private /opt/ml here ({problem}): run the job with --runtime docker, or "
                                     "use the SM_* variables (SM_MODEL_DIR, SM_OUTPUT_DATA_DIR, ...)")
        return args

    def _command_kwargs(self, launch: TrainingLaunch, kwargs: dict[str, Any]) -> dict[str, Any]:
        """A container command here: its /opt/ml paths (and those of the channels it runs) moved to
        the job folder (launcher/runtime/opt_ml.py); python3 the training's interpreter; the zero-code
        hook attached to the scripts it starts (hook/zero_code/sitecustomize.py)."""
        from sdlocal.hook.zero_code import site_dir
        from sdlocal.launcher.runtime.opt_ml import command_env, localize_channels, map_opt_ml

        root = launch.job_root
        argv = [map_opt_ml(arg, root) for arg in kwargs["args"]]
        try:
            localize_channels(root, kwargs["args"])
        except OSError as e:
            raise RuntimeLaunchError(f"cannot prepare the channels of the container command: {e}") from e
        env = command_env({**self.base_env, **kwargs["env"]}, self.python, site_dir())
        return {"args": argv, "cwd": kwargs["cwd"], "env": env}

    def start_rule(self, launch: RuleLaunch) -> ProcessHandle:
        return self._start(f"rule {launch.rule_name}", launch.log_path, launch.to_process_kwargs(self.python),
                           {LABEL_JOB: launch.job_name, LABEL_ROLE: "rule", LABEL_RULE: launch.rule_name})

    def _start(self, name: str, log_path: Path, kwargs: dict[str, Any], labels: dict[str, str]) -> ProcessHandle:
        return start_process(name, log_path, kwargs["args"], cwd=kwargs["cwd"],
                             env={**self.base_env, **kwargs["env"]}, labels=labels)


def child_env(env: Mapping[str, str]) -> dict[str, str]:
    """`env` for a child of this process: it finds sdlocal where this process does (the same
    interpreter and installation), and user code's `import smdebug` gets sdlocal's
    (trial/smdebug_shim.py)."""
    out = dict(env)
    compat = str(compat_dir())
    if compat not in (out.get("PYTHONPATH") or "").split(os.pathsep):
        out["PYTHONPATH"] = os.pathsep.join(filter(None, [compat, out.get("PYTHONPATH")]))
    return out


def start_process(name: str, log_path: Path, args: list[str], *, cwd: str, env: Mapping[str, str],
                  labels: Mapping[str, str] | None = None) -> ProcessHandle:
    """`args` in a process group of its own, stdout and stderr appended to `log_path`."""
    env = child_env(env)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                args, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
    except OSError as e:
        raise RuntimeLaunchError(f"cannot start {name}: {e}") from e
    return ProcessHandle(name, log_path, proc, labels)


def wait_all(handles: list[Handle], timeout: float, *, clock: Any = time.monotonic, interval: float = 0.2) -> bool:
    """Wait until every handle exited or the deadline passed; True if all exited."""

    def pause(seconds: float) -> None:
        running = [h for h in handles if h.poll() is None]
        if running:
            running[0].wait(seconds)

    return wait_for(lambda: all(h.poll() is not None for h in handles), Deadline.after(timeout, clock),
                    interval=interval, pause=pause).ready


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
