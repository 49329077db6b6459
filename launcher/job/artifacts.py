"""After training, as SageMaker does: `/opt/ml/model` published as `<out>/<job>/output/model.tar.gz`,
`/opt/ml/output/data` as `output.tar.gz` beside it, and the training's `FailureReason`.

The failure file follows the training toolkit: `/opt/ml/output/failure` written by the script
itself wins; else the launcher writes the toolkit's `ExecuteUserScriptError` text (exit code, the
last error line of the training log, the command). `FailureReason` is SageMaker's
`AlgorithmError: <failure file>`, at most 1024 characters.
"""
from __future__ import annotations

import re
import shlex
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from sdlocal.trial.errors import one_line
from sdlocal.trial.storage import Storage

if TYPE_CHECKING:
    from sdlocal.launcher.job.model import JobResult
    from sdlocal.launcher.jobdir.folder import JobDir
    from sdlocal.launcher.runtime import Handle
    from sdlocal.launcher.spec.model import JobSpec

MAX_FAILURE_REASON = 1024
_FILE_LINE = re.compile(r'^File "(.+)", line (\d+)')
_ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit|Failure)\b")


def _tar_folder(folder: Path, archive: Path) -> None:
    """A gzipped tarball of the folder's contents at its root (`model.pth`, not `model/model.pth`)."""
    with tarfile.open(archive, "w:gz") as tar:
        if folder.is_dir():
            for entry in sorted(folder.iterdir()):
                tar.add(entry, arcname=entry.name)


def publish_folder(folder: Path, output: Storage, name: str, work_dir: Path) -> None:
    """Tar and gzip `folder` (an empty tarball when it is empty or missing) and store it as `name`
    in `output` (the job's `<out>/<job>/output`)."""
    work_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=work_dir, prefix=".publish-") as tmp:
        archive = Path(tmp) / name
        _tar_folder(folder, archive)
        output.write_file(name, archive)  # multipart for large models


def failure_reason(failure_file: Path, exit_code: int | None, entry_point: str, user_args: list[str],
                   log_lines: list[str], *, program: bool = False) -> str:
    """The job's FailureReason; writes the failure file when the script did not (the toolkit's way).
    `program`: `entry_point` is the command's program itself, not a script run by python."""
    try:
        text = failure_file.read_text(errors="replace").strip()
    except OSError:
        text = ""
    if not text:
        message = _error_message(log_lines)
        command = shlex.join([*([] if program else ["python"]), entry_point, *user_args])
        text = f'ExecuteUserScriptError:\nExitCode {exit_code}\nErrorMessage "{message}"\nCommand "{command}"'
        failure_file.parent.mkdir(parents=True, exist_ok=True)
        failure_file.write_text(text)
    return f"AlgorithmError: {text}"[:MAX_FAILURE_REASON]


def _error_message(log_lines: list[str]) -> str:
    """The log's last Python error line; a SyntaxError (the script does not even compile) also
    gets the file and line from the traceback line before it, as `str(SyntaxError)` says them."""
    errors = [i for i, line in enumerate(log_lines) if _ERROR_LINE.match(line.strip())]
    if not errors:
        return log_lines[-1].strip() if log_lines else ""
    message = log_lines[errors[-1]].strip()
    if message.split(":", 1)[0] in ("SyntaxError", "IndentationError", "TabError"):
        where = [m for line in log_lines[:errors[-1]] if (m := _FILE_LINE.match(line.strip()))]
        if where and "line " not in message:
            message += f" ({Path(where[-1].group(1)).name}, line {where[-1].group(2)})"
    return message


def write_success(output_dir: Path) -> None:
    """The toolkit's `/opt/ml/output/success` marker."""
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / "success").touch()


def publish_outputs(spec: JobSpec, job_dir: JobDir, training: Handle | None, result: JobResult,
                    storage: Callable[[str], Storage], echo: Callable[[str], None]) -> tuple[str | None, str | None]:
    """(FailureReason, model artifacts URI) once the training ended: a failed training gets the
    first; a completed or stopped one has /opt/ml/model and /opt/ml/output/data published (SageMaker
    uploads them on stop too). A publication that fails is said, not raised: the rules still need
    their wait."""
    if result.training_failed and not result.stopped:
        entry_point, args = spec.entry_point, spec.training_environment().user_args()
        if spec.algorithm is not None:  # the algorithm's or the container command's own command line
            entry_point, *args = spec.algorithm.argv("python")
        elif spec.command is not None:
            entry_point, *args = spec.command.argv()
        return failure_reason(job_dir.failure_file, result.training_exit_code, entry_point, args,
                              training.last_log_lines(40) if training else [], program=not spec.script_mode), None
    if training is None:
        return None, None
    if result.training_exit_code == 0:
        write_success(job_dir.root / "output")
    try:
        output = storage(spec.model_output)
        publish_folder(job_dir.model, output, "model.tar.gz", job_dir.root)
        publish_folder(job_dir.output_data, output, "output.tar.gz", job_dir.root)
    except Exception as e:  # noqa: BLE001
        echo(f"Warning: could not publish the model artifacts to {spec.model_artifacts}: {one_line(e)}")
        return None, None
    echo(f"Model artifacts: {spec.model_artifacts}")
    return None, spec.model_artifacts
