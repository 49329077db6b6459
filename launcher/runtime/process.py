"""`ProcessRuntime`: training and evaluators as subprocesses of this host, each in its own process
group (so Ctrl-C reaches the launcher only, and stopping a job leaves no grandchild behind)."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sdlocal.launcher.errors import RuntimeLaunchError
from sdlocal.launcher.jobdir.training_env import count_gpus
from sdlocal.launcher.runtime.base import Handle, RuleLaunch, Runtime, TrainingLaunch
from sdlocal.launcher.settings import LABEL_JOB, LABEL_ROLE, LABEL_RULE
from sdlocal.launcher.wait import Deadline, wait_for
from sdlocal.trial.smdebug_shim import compat_dir


class ProcessHandle(Handle):
    def __init__(self, name: str, log_path: Path, proc: subprocess.Popen[bytes],
                 labels: Mapping[str, str] | None = None) -> None:
        super().__init__(name, log_path, dict(labels or {}))
        self.proc = proc

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

    def start_training(self, launch: TrainingLaunch) -> ProcessHandle:
        if launch.network_isolation:
            raise RuntimeLaunchError("EnableNetworkIsolation: a training process of this host cannot be cut off "
                                     "the network; use the docker runtime")
        if self.num_gpus is None:
            self.num_gpus = count_gpus()
        kwargs = launch.to_process_kwargs(self.python, num_gpus=self.num_gpus)
        if launch.command is not None:
            kwargs = self._command_kwargs(launch, kwargs)
        return self._start(f"training {launch.job_name}", launch.log_path, kwargs,
                           {LABEL_JOB: launch.job_name, LABEL_ROLE: "training"})

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


def start_process(name: str, log_path: Path, args: list[str], *, cwd: str, env: Mapping[str, str],
                  labels: Mapping[str, str] | None = None) -> ProcessHandle:
    """`args` in a process group of its own, stdout and stderr appended to `log_path`."""
    env = dict(env)
    # The child finds sdlocal where this process does (the same interpreter and installation), and
    # user code's `import smdebug` gets sdlocal's (trial/smdebug_shim.py).
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(compat_dir()), env.get("PYTHONPATH")]))
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
