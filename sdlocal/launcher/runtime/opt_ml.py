"""A container command (ContainerEntrypoint + ContainerArguments) run by the process runtime, where
the job's `/opt/ml` is its job folder on this host.

Such a command names the container's paths itself: the SDK v3 ModelTrainer's is
`/bin/bash -c "chmod +x /opt/ml/input/data/sm_drivers/sm_train.sh && /opt/ml/input/data/sm_drivers/sm_train.sh"`,
and its drivers (sm_train.sh, scripts/environment.py, common/utils.py) hard-code `/opt/ml/...`: the
environment file they write sets `SM_MODEL_DIR=/opt/ml/model` whatever the job's variables said, so
setting `SM_*` variables cannot move them. sdlocal never writes to this host's own `/opt/ml` and
cannot mount the job folder there without privileges, so it rewrites the paths instead:

- `/opt/ml` in the command's arguments becomes the job folder;
- the channels the command names (`/opt/ml/input/data/<channel>`), and the channels their files name
  in turn (the drivers name `code`, the user's source), are made the job's own copies (a local
  channel's folder is copied, never changed in place) and, in each of their text files (UTF-8, at
  most 1 MiB) that says `/opt/ml`, that path becomes the job folder. Data channels the command
  does not name are left alone.

A path such as `/opt/mlflow` is not `/opt/ml`. A job folder with a space in its path would break
unquoted shell words: `$SDLOCAL_HOME` should have none.
"""
from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable
from pathlib import Path

CONTAINER_ROOT = "/opt/ml"
MAX_REWRITTEN_BYTES = 1024 * 1024
_OPT_ML = re.compile(r"/opt/ml(?![\w.-])")
_CHANNEL = re.compile(r"/opt/ml/input/data/([A-Za-z0-9][A-Za-z0-9_.-]*)")


def map_opt_ml(text: str, root: Path) -> str:
    """`text` with every `/opt/ml` path moved under `root`."""
    return _OPT_ML.sub(lambda _m: str(root), text)


def named_channels(texts: Iterable[str]) -> set[str]:
    """The channels `/opt/ml/input/data/<channel>` paths in `texts` name."""
    return {m.group(1) for text in texts for m in _CHANNEL.finditer(text)}


def _own_copy(folder: Path) -> None:
    """The channel folder made the job's own: a symlinked local channel (or its one linked file) copied."""
    if folder.is_symlink():
        target = folder.resolve()
        folder.unlink()
        shutil.copytree(target, folder, symlinks=False)
        return
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            target = path.resolve()
            path.unlink()
            if target.is_dir():
                shutil.copytree(target, path, symlinks=False)
            else:
                shutil.copy2(target, path)


def _rewrite_file(path: Path, root: Path) -> str | None:
    """The file with `/opt/ml` rewritten when it is text that says it; its (old) text, else None."""
    try:
        if path.stat().st_size > MAX_REWRITTEN_BYTES:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    if b"/opt/ml" not in data:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    path.write_text(map_opt_ml(text, root), encoding="utf-8")
    return text


def localize_channels(root: Path, argv: Iterable[str]) -> list[str]:
    """Rewrite the channels under `root/input/data` that `argv` names (and those their files name);
    the channels rewritten, in the order found."""
    data = root / "input" / "data"
    pending = sorted(named_channels(argv))
    done: list[str] = []
    while pending:
        name = pending.pop(0)
        folder = data / name
        if name in done or not (folder.is_dir() or folder.is_symlink()):
            continue
        _own_copy(folder)
        done.append(name)
        texts = []
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                old = _rewrite_file(path, root)
                if old is not None:
                    texts.append(old)
        pending += sorted(named_channels(texts) - set(done) - set(pending))
    return done


def command_env(env: dict[str, str], python: str, site_dir: Path | None) -> dict[str, str]:
    """The command's environment: `python3`/`python` on PATH are the training's interpreter (as in
    the training image), and `site_dir` (the zero-code hook's sitecustomize, hook/zero_code/) first
    on PYTHONPATH."""
    out = dict(env)
    out["PATH"] = os.pathsep.join(filter(None, [str(Path(python).parent), out.get("PATH")]))
    if site_dir is not None:
        out["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site_dir), out.get("PYTHONPATH")]))
    return out
