"""`requirements.txt` in the code directory, installed before the entry point runs, as SageMaker's
training toolkit does (`python -m pip install -r requirements.txt` in /opt/ml/code) — but into
the job's own environment, never into the Python that runs the training.

The training toolkit installs into the container's Python; under sdlocal's process runtime that
Python is the user's own. So `python -m sdlocal.hook.run` (both runtimes) makes a per-job virtual
environment that sees everything the training's Python has (a .pth file in its site-packages adds
that Python's site directories after its own, their .pth files processed, editable installs
included), runs one ordinary `pip install -r requirements.txt` in it (pip skips what is already
satisfied: a `torch` line does not reinstall torch; a different version, or a missing package, is
installed into the job's environment, which comes first), and runs the training with that
environment's interpreter (the same Python binary; hook.run re-executes itself, same process).
Why not `pip install --target DIR` on PYTHONPATH: `--target` ignores what is installed, so every
requirement and its dependencies would be installed again in each job (torch: gigabytes).

The environment is `<job>/requirements-env` under the process runtime, a folder of the container's
own under docker (its /opt/ml is not writable there). pip's output goes to the training log; when
it fails, the training fails with the toolkit's `InstallRequirementsError` as its failure file
(FailureReason `AlgorithmError: InstallRequirementsError: ... requirements.txt ...`).
Outside a training job (no TRAINING_JOB_NAME) nothing is installed.

Several processes of one host (torchrun's, mpirun's: each runs `python -m sdlocal.hook.run`) share
the host's environment: the first makes it under a file lock, the others wait for the lock and use
it (`.sdlocal-ready` in it names the launch that made it: the processes' common parent).
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import site
import subprocess
import sys
import tempfile
import venv
from collections.abc import Iterator, Sequence
from pathlib import Path

from sdlocal.hook._job_paths import CONTAINER_ROOT, job_root

REQUIREMENTS = "requirements.txt"
READY_ENV = "SDLOCAL_REQUIREMENTS_ENV"  # set for the re-executed training: its environment is ready
ENV_FOLDER = "requirements-env"
# pip settings that would install somewhere else than the job's environment
_REDIRECTS = ("PIP_TARGET", "PIP_PREFIX", "PIP_ROOT", "PIP_USER", "PIP_REQUIRE_VIRTUALENV")


class RequirementsError(Exception):
    """pip could not install requirements.txt: the toolkit's failure text."""


def environment_folder() -> Path | None:
    """Where the job's environment goes: None outside a job."""
    if not os.environ.get("TRAINING_JOB_NAME"):
        return None
    root = job_root()
    if root is None or root == CONTAINER_ROOT:
        return Path(tempfile.gettempdir()) / f"sdlocal-{ENV_FOLDER}"
    return Path(root) / ENV_FOLDER


def _host_site_dirs() -> list[str]:
    """The site directories of the Python running now, in sys.path order."""
    dirs = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    return [p for p in sys.path if p in dirs and os.path.isdir(p)]


def create_environment(folder: Path) -> Path:
    """A fresh virtual environment at `folder` seeing this Python's packages; its interpreter."""
    shutil.rmtree(folder, ignore_errors=True)  # a job run again in its folder starts clean
    import importlib.util

    has_pip = importlib.util.find_spec("pip") is not None
    venv.EnvBuilder(with_pip=not has_pip, symlinks=os.name != "nt").create(folder)
    python = folder / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    lines = [f"import site; site.addsitedir({d!r})" for d in _host_site_dirs()]
    (Path(purelib) / "_sdlocal_training_python.pth").write_text("\n".join(lines) + "\n")
    return python


def install(code_dir: Path, python: Path, *, timeout_s: float = 3600.0) -> None:
    """`python -m pip install -r requirements.txt` in `code_dir`, its output on this process's
    stdout (the training log); RequirementsError with the toolkit's text when it fails."""
    command = [str(python), "-m", "pip", "install", "-r", REQUIREMENTS]
    print(f"Installing dependencies from requirements.txt:\n{' '.join(command)}", flush=True)
    env = {k: v for k, v in os.environ.items() if k not in _REDIRECTS}
    env.pop(READY_ENV, None)
    errors: list[str] = []
    last = ""
    try:
        proc = subprocess.Popen(command, cwd=code_dir, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, errors="replace")
    except OSError as e:
        raise RequirementsError(_failure(1, str(e), command)) from e
    assert proc.stdout is not None
    for line in proc.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        if line.strip():
            last = line.strip()
            if last.startswith("ERROR"):
                errors.append(last)
    try:
        code = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise RequirementsError(_failure(-9, f"pip did not finish in {timeout_s:.0f} s", command)) from None
    if code != 0:
        raise RequirementsError(_failure(code, errors[0] if errors else last, command))


def _failure(code: int, message: str, command: Sequence[str]) -> str:
    return (f'InstallRequirementsError:\nExitCode {code}\nErrorMessage "{message}"\n'
            f'Command "{" ".join(command)}"')


def failure_file() -> Path | None:
    output = os.environ.get("SM_OUTPUT_DIR")
    if output:
        return Path(output) / "failure"
    root = job_root()
    return Path(root) / "output" / "failure" if root else None


READY_MARKER = ".sdlocal-ready"
_LOCAL_RANK_VARIABLES = ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK")


def _launch_id() -> str | None:
    """The launch this process is one of several of on its host (their common parent: torchrun, or
    Open MPI's daemon), else None."""
    if any(v in os.environ for v in _LOCAL_RANK_VARIABLES):
        return str(os.getppid())
    return None


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # the first process installs; the others wait for it
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _ready_environment(folder: Path, code_dir: Path) -> Path:
    """The job's environment with the requirements installed: made and installed here, or (one of
    several processes of a host) made by the first of them."""
    launch = _launch_id()
    if launch is None:
        return _made_environment(folder, code_dir)
    with _locked(folder.with_name(folder.name + ".lock")):
        marker = folder / READY_MARKER
        with contextlib.suppress(OSError):
            if marker.read_text() == launch:
                return folder / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
        python = _made_environment(folder, code_dir)
        marker.write_text(launch)
        return python


def _made_environment(folder: Path, code_dir: Path) -> Path:
    try:
        python = create_environment(folder)
    except (OSError, subprocess.SubprocessError) as e:
        raise RequirementsError(_failure(1, f"cannot create the job's environment in {folder}: {e}",
                                         ["python", "-m", "venv", str(folder)])) from e
    install(code_dir, python)
    return python


def prepare(argv: Sequence[str], code_dir: Path | None = None) -> int | None:
    """Before `python -m sdlocal.hook.run ARGV` runs the script: with a requirements.txt in the code
    directory (the working directory, /opt/ml/code) of a training job, install it into the job's
    environment and re-execute hook.run with that environment's interpreter (does not return).
    None when there is nothing to install (or it was installed: this is the re-executed run);
    1 when the installation failed (the failure file written)."""
    code_dir = code_dir or Path.cwd()
    folder = environment_folder()
    if folder is None or os.environ.get(READY_ENV) or not (code_dir / REQUIREMENTS).is_file():
        return None
    try:
        python = _ready_environment(folder, code_dir)
    except RequirementsError as e:
        print(f"sdlocal.hook.run: {e}", file=sys.stderr, flush=True)
        target = failure_file()
        if target is not None:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(str(e))
        return 1
    env = {**os.environ, READY_ENV: str(folder)}
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(str(python), [str(python), "-m", "sdlocal.hook.run", *argv], env)
    return None  # not reached
