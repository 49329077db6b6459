"""After training, as SageMaker does: `/opt/ml/model` published as `<out>/<job>/output/model.tar.gz`,
`/opt/ml/output/data` as `output.tar.gz` beside it, and the training's `FailureReason`.

The failure file follows the training toolkit: `/opt/ml/output/failure` written by the script
itself wins; else the launcher writes the toolkit's `ExecuteUserScriptError` text (exit code, the
last error line of the training log, the command). `FailureReason` is SageMaker's
`AlgorithmError: <failure file>`, at most 1024 characters.

Several hosts: SageMaker aggregates every host's `/opt/ml/model` (and `/opt/ml/output/data`) into
the one tarball ("they should ensure no file names clash": a name two hosts wrote is taken from
the first host, said once); a failed job's reason is the failed host's (launcher/job/hosts.py),
naming it and, for torchrun, the rank that failed.
"""
from __future__ import annotations

import shlex
import tarfile
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from sdlocal.launcher.job.error_lines import error_message
from sdlocal.launcher.job.hosts import host_failure
from sdlocal.launcher.jobdir.training_env import training_environment
from sdlocal.trial.errors import one_line
from sdlocal.trial.storage import Storage

if TYPE_CHECKING:
    from sdlocal.launcher.job.model import JobResult
    from sdlocal.launcher.jobdir.folder import JobDir
    from sdlocal.launcher.runtime import Handle
    from sdlocal.launcher.spec.model import JobSpec

MAX_FAILURE_REASON = 1024


def _tar_folders(folders: Sequence[Path], archive: Path) -> list[str]:
    """A gzipped tarball of the folders' contents at its root (`model.pth`, not `model/model.pth`);
    a top-level name in several folders is taken from the first. The names left out."""
    clashes: list[str] = []
    taken: set[str] = set()
    with tarfile.open(archive, "w:gz") as tar:
        for folder in folders:
            if not folder.is_dir():
                continue
            for entry in sorted(folder.iterdir()):
                if entry.name in taken:
                    clashes.append(entry.name)
                    continue
                taken.add(entry.name)
                tar.add(entry, arcname=entry.name)
    return clashes


def publish_folder(folder: Path | Sequence[Path], output: Storage, name: str, work_dir: Path) -> list[str]:
    """Tar and gzip `folder` (or the folders of several hosts, aggregated; an empty tarball when
    there is nothing) and store it as `name` in `output` (the job's `<out>/<job>/output`). The
    names two folders had (taken from the first)."""
    folders = [folder] if isinstance(folder, Path) else list(folder)
    work_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=work_dir, prefix=".publish-") as tmp:
        archive = Path(tmp) / name
        clashes = _tar_folders(folders, archive)
        output.write_file(name, archive)  # multipart for large models
    return clashes


def failure_reason(failure_file: Path, exit_code: int | None, entry_point: str, user_args: list[str],
                   log_lines: list[str], *, message: str | None = None, command: Sequence[str] | None = None) -> str:
    """The job's FailureReason; writes the failure file when the script did not (the toolkit's way).
    `message`/`command`: the ErrorMessage and Command to report (default: the log's last error
    line, `python <entry point> <args>`)."""
    try:
        text = failure_file.read_text(errors="replace").strip()
    except OSError:
        text = ""
    if not text:
        message = message or error_message(log_lines)
        command = shlex.join(list(command) if command else ["python", entry_point, *user_args])
        text = f'ExecuteUserScriptError:\nExitCode {exit_code}\nErrorMessage "{message}"\nCommand "{command}"'
        failure_file.parent.mkdir(parents=True, exist_ok=True)
        failure_file.write_text(text)
    return f"AlgorithmError: {text}"[:MAX_FAILURE_REASON]


def write_success(output_dir: Path) -> None:
    """The toolkit's `/opt/ml/output/success` marker."""
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / "success").touch()


def publish_outputs(spec: JobSpec, job_dir: JobDir, training: Handle | None, result: JobResult,
                    storage: Callable[[str], Storage], echo: Callable[[str], None]) -> tuple[str | None, str | None]:
    """(FailureReason, model artifacts URI) once the training ended: a failed training gets the
    first; a completed or stopped one has /opt/ml/model and /opt/ml/output/data published (SageMaker
    uploads them on stop too), every host's aggregated. A publication that fails is said, not
    raised: the rules still need their wait."""
    hosts = [job_dir.host_dir(host) for host in spec.hosts]
    if result.training_failed and not result.stopped:
        failed = host_failure(spec, training)
        command = failed.command
        if command is None and spec.algorithm is not None:  # the algorithm's own command line
            command = spec.algorithm.argv("python")
        elif command is None and spec.command is not None:  # the container command's
            command = spec.command.argv()
        return failure_reason(job_dir.host_dir(failed.host).failure_file, result.training_exit_code,
                              spec.entry_point, training_environment(spec, failed.host).user_args(), failed.log_lines,
                              message=failed.message, command=command), None
    if training is None:
        return None, None
    if result.training_exit_code == 0:
        for host_dir in hosts:
            write_success(host_dir.root / "output")
    try:
        output = storage(spec.model_output)
        clashes = publish_folder([h.model for h in hosts], output, "model.tar.gz", job_dir.root)
        clashes += publish_folder([h.output_data for h in hosts], output, "output.tar.gz", job_dir.root)
    except Exception as e:  # noqa: BLE001
        echo(f"Warning: could not publish the model artifacts to {spec.model_artifacts}: {one_line(e)}")
        return None, None
    if clashes:
        echo(f"Warning: several hosts wrote {', '.join(sorted(set(clashes)))} to /opt/ml/model or /opt/ml/output/data: "
             "the archive has the first host's")
    echo(f"Model artifacts: {spec.model_artifacts}")
    return None, spec.model_artifacts
