"""SageMaker's container paths (`/opt/ml/...`) given to a hook, mapped to the job's folders.

Scripts written for SageMaker name the container's folders: `smd.Hook(out_dir="/opt/ml/output/tensors")`
(the notebooks' default, for the PyTorch and the XGBoost hook alike), `tensorboard_dir=
"/opt/ml/output/tensorboard"`. In a container (SageMaker, sdlocal's docker runtime) those are the
job's folders. Under sdlocal's process runtime the job's `/opt/ml` is its job folder on this host
(`$SDLOCAL_HOME/jobs/<job>`), named by the training toolkit's variables (`SM_INPUT_DIR`, ...): a
path under `/opt/ml` then means the same path under the job folder (the tensors folder: the hook
config's `LocalPath`, which the launcher uploads to debug-output; TensorBoard's: the
TensorBoardOutputConfig's `LocalPath`), so a job never writes to this host's own `/opt/ml`.
Outside a job, and where the job's `/opt/ml` is `/opt/ml`, a path is used as given.

Both hooks' smdebug constructors resolve `out_dir` here (`resolve_out_dir`), and both engines map
what they are given (`job_path`), so there is one mapping.
"""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from sdlocal.hook import _tensorboard
from sdlocal.hook.config import DEFAULT_LOCAL_PATH, HookConfig
from sdlocal.hook.errors import HookError
from sdlocal.trial.writer import END_MARKER

CONTAINER_ROOT = "/opt/ml"
TENSORBOARD_PATH = "/opt/ml/output/tensorboard"
# The toolkit's variables naming folders right under the job's /opt/ml (training_env.py writes them).
_ROOT_VARIABLES = (("SM_INPUT_DIR", "input"), ("SM_OUTPUT_DIR", "output"), ("SM_MODEL_DIR", "model"))


def _local_path(config_file: str) -> str | None:
    """`LocalPath` of a job config file (debughookconfig.json, tensorboardoutputconfig.json); None
    when there is no such file or it names none."""
    try:
        data = json.loads(Path(config_file).read_text())
    except (OSError, ValueError):
        return None
    local = data.get("LocalPath") if isinstance(data, dict) else None
    return local if isinstance(local, str) and local else None


def job_root() -> str | None:
    """The job's `/opt/ml` as the training sees it (from the toolkit's SM_* variables); None outside a job."""
    for variable, name in _ROOT_VARIABLES:
        value = os.environ.get(variable)
        if value and os.path.basename(os.path.normpath(value)) == name:
            return os.path.dirname(os.path.normpath(value))
    return None


def job_tensorboard_dir() -> str | None:
    """The LocalPath of the running job's TensorBoardOutputConfig; None without one."""
    return _local_path(_tensorboard.config_path())


def job_tensors_dir() -> str | None:
    """The running job's tensors folder (its hook config's LocalPath, SageMaker's by default); None
    outside a job (no hook config file)."""
    config_file = HookConfig.default_path()
    if not os.path.isfile(config_file):
        return None
    return job_path(_local_path(config_file) or DEFAULT_LOCAL_PATH)


def _under(path: str, folder: str) -> str | None:
    """`path` relative to `folder` ("" for the folder itself), None when it is not inside it."""
    if path == folder:
        return ""
    return path[len(folder) + 1:] if path.startswith(folder + os.sep) else None


def job_path(path: str | os.PathLike[str]) -> str:
    """`path` as this job's training must use it: a container path under `/opt/ml` moved to the
    job's folder when the job's `/opt/ml` is elsewhere; anything else unchanged."""
    text = os.fspath(path)
    norm = os.path.normpath(os.path.expanduser(text))
    rel = _under(norm, CONTAINER_ROOT)
    if rel is None:
        return text
    # the folders the launcher uploads: where the job's config files put them (on this host)
    known = ((DEFAULT_LOCAL_PATH, _local_path(HookConfig.default_path())),
             (TENSORBOARD_PATH, job_tensorboard_dir()))
    for container, local in known:
        sub = _under(norm, container)
        if sub is not None and local and _under(os.path.normpath(local), CONTAINER_ROOT) is None:
            return os.path.join(local, sub) if sub else local
    root = job_root()
    if root is None or root == CONTAINER_ROOT:
        return text
    return os.path.join(root, rel) if rel else root


def resolve_out_dir(out_dir: str | os.PathLike[str] | None, logger: logging.Logger) -> Path:
    """smdebug's `Hook(out_dir=...)` in sdlocal: None means the job's tensors folder (required
    outside a job, as smdebug); `s3://` is refused (the job uploads its folder); a container path
    is mapped (job_path); another folder than the job's is written but not uploaded (said once);
    a folder holding a finished trial is refused, as smdebug does."""
    job = job_tensors_dir()
    if out_dir is None:
        if job is None:
            raise HookError("Hook: out_dir is a required argument outside a training job")
        return Path(job)
    text = os.fspath(out_dir)
    if text.startswith("s3://"):
        raise HookError(f"Hook(out_dir={text!r}): sdlocal's hook writes local folders only; in a training "
                        "job leave out_dir out (the job uploads its tensors folder to S3)")
    path = Path(job_path(os.path.expanduser(text)))
    if os.path.normpath(path) != os.path.normpath(os.path.expanduser(text)):
        logger.info("out_dir %s is SageMaker's container path: this job's is %s, used instead", text, path)
    if job is not None and os.path.normpath(path.absolute()) != os.path.normpath(Path(job).absolute()):
        logger.warning("sdlocal: this hook writes to %s, not to the job's tensors folder %s: what it saves is "
                       "not uploaded to the job's debug-output and the job's rules do not see it", path, job)
    if (path / END_MARKER).exists():
        raise HookError(f"Hook: out_dir {path} holds a finished trial ({END_MARKER}); smdebug does not write "
                        "into one: remove it or choose another out_dir")
    return path


def resolve_tensorboard_dir(export: bool, tensorboard_dir: str | os.PathLike[str] | None,
                            out_dir: str | os.PathLike[str]) -> str | None:
    """smdebug's rule: the given folder (mapped as job_path), else `<out_dir>/tensorboard` when
    exporting, else None."""
    if tensorboard_dir is not None:
        return job_path(os.path.expanduser(os.fspath(tensorboard_dir)))
    return os.path.join(os.fspath(out_dir), "tensorboard") if export else None
