"""Where a process-runtime training's `/opt/ml` is: the job folder on a private mount (when this
machine allows it), else the launcher's choice between today's paths and a refusal.

A script written for SageMaker may name `/opt/ml/...` itself: its own TensorBoard writer on
`/opt/ml/output/tensorboard`, `torch.save(model, "/opt/ml/model/model.pt")`, a config file read from
`/opt/ml/input/config`. Under the process runtime the job's `/opt/ml` is its job folder
(`$SDLOCAL_HOME/jobs/<job>`, named by the SM_* variables), so such a script would read and write this
host's own `/opt/ml`. Decisions:

- **A private `/opt/ml` where the machine allows it** (root, as CI and containers run; or a user
  with unprivileged user namespaces): every training of the process runtime runs in a mount
  namespace of its own with its host's job folder on `/opt/ml` (launcher/runtime/private_opt_ml.py).
  The SM_* variables keep naming the job folder itself (the same files). Each host of a job gets
  its own folder on `/opt/ml` (`JobDir.host_dir`), as each SageMaker instance has its own. mpirun
  jobs (`Runtime.start_mpi`: one mpirun across every host's processes) are left as they are.
- **Elsewhere** (`unshare` refused, no `/opt`, or `SDLOCAL_PRIVATE_OPT_ML=off`), today's behaviour
  for a job that does not name `/opt/ml` itself: nothing to protect. A job whose source names it
  directly is refused at start, in one line naming the file, the line and the docker runtime:
  it would write into this host's `/opt/ml` (as root) or fail halfway (as another user). "Names it
  directly": a `.py`/`.sh` file of the source folder with a line that says `/opt/ml` and is not a
  comment, not the fallback of an SM_* variable (`os.environ.get("SM_MODEL_DIR", "/opt/ml/model")`,
  the usual argparse default: the variable wins) and not a hook's `out_dir`/`tensorboard_dir` (the
  hook maps those itself: hook/_job_paths.py). A container command (ContainerEntrypoint) keeps its
  path rewriting (launcher/runtime/opt_ml.py), namespace or not.
"""
from __future__ import annotations

import functools
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

from sdlocal.launcher.runtime import private_opt_ml

HELPER = Path(private_opt_ml.__file__)
MAX_SCANNED_FILES = 400
MAX_SCANNED_BYTES = 1024 * 1024
_OPT_ML = re.compile(r"/opt/ml(?![\w.-])")
_SAFE = re.compile(r"SM_[A-Z_]+|environ|getenv|out_dir|tensorboard_dir")
_SKIPPED_DIRS = frozenset({"__pycache__", "site-packages", "node_modules"})


@functools.lru_cache(maxsize=4)
def namespace_problem(python: str) -> str | None:
    """None when a training started by `python` can get a private /opt/ml here, else why not
    (one probe per interpreter and launcher process)."""
    try:
        done = subprocess.run([python, "-I", "-S", str(HELPER), "--probe"], capture_output=True, text=True,
                              timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"the probe did not run: {e}"
    if done.returncode == 0:
        return None
    lines = (done.stderr or done.stdout).strip().splitlines()
    return (lines[-1] if lines else f"the probe exited {done.returncode}").removeprefix("sdlocal: ")


def wrapped(python: str, job_root: Path, args: list[str]) -> list[str]:
    """`args` run with `job_root` on /opt/ml in a mount namespace of their own."""
    return [python, "-I", "-S", str(HELPER), str(job_root), "--", *args]


def _source_files(source_dir: Path, entry_point: str) -> Iterator[Path]:
    entry = source_dir / entry_point
    if entry.is_file():
        yield entry
    count = 0
    for path in sorted(source_dir.rglob("*")):
        if count >= MAX_SCANNED_FILES:
            return
        parts = path.relative_to(source_dir).parts
        if any(p.startswith(".") or p in _SKIPPED_DIRS for p in parts):
            continue
        if path.suffix in (".py", ".sh") and path.is_file() and path != entry:
            count += 1
            yield path


def direct_opt_ml_use(source_dir: Path, entry_point: str) -> str | None:
    """`train.py:12` (the first line of the source that names /opt/ml itself), or None."""
    for path in _source_files(source_dir, entry_point):
        try:
            if path.stat().st_size > MAX_SCANNED_BYTES:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if "/opt/ml" not in text:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            stripped = line.strip()
            if _OPT_ML.search(stripped) and not stripped.startswith("#") and not _SAFE.search(stripped):
                return f"{path.relative_to(source_dir)}:{number}"
    return None
