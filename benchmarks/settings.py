"""What one benchmark run measures: a frozen settings object, quick and full presets, and where
the smdebug side virtualenv lives."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from benchmarks.errors import BenchmarkError

REPO_ROOT = Path(__file__).resolve().parent.parent
WORKERS = Path(__file__).resolve().parent / "workers"
DEFAULT_RESULTS_DIR = Path(__file__).resolve().parent / "results"
SIDE_VENV_CANDIDATES = (REPO_ROOT / ".venv-smdebug" / "bin" / "python", Path("/work/smdebug-venv/bin/python"))
UPB_VENV_PYTHON = REPO_ROOT / ".venv-smdebug-upb" / "bin" / "python"  # benchmarks/smdebug_upb.py --make


@dataclass(frozen=True)
class BenchSettings:
    mode: str  # "quick" or "full"
    steps: int  # timed training steps per run
    warmup: int  # untimed steps before them (the hook is attached and counts them)
    repeats: int  # rounds; every configuration runs once per round, in a shuffled order
    intervals: tuple[int, ...]
    read_steps: int  # steps saved (every step) in the trial the readers read
    read_repeats: int
    worker_timeout_s: float  # deadline for any one worker process

    def __post_init__(self) -> None:
        for field in ("steps", "repeats", "read_steps", "read_repeats"):
            if getattr(self, field) < 1:
                raise BenchmarkError(f"settings.{field} must be >= 1, got {getattr(self, field)}")
        if self.warmup < 0:
            raise BenchmarkError(f"settings.warmup must be >= 0, got {self.warmup}")
        if not self.intervals or min(self.intervals) < 1:
            raise BenchmarkError(f"settings.intervals must be positive, got {self.intervals}")

    def with_overrides(self, **overrides: object) -> BenchSettings:
        return replace(self, **{k: v for k, v in overrides.items() if v is not None})  # type: ignore[arg-type]


FULL = BenchSettings(
    mode="full", steps=300, warmup=20, repeats=7, intervals=(1, 10, 100),
    read_steps=50, read_repeats=3, worker_timeout_s=600.0,
)
QUICK = BenchSettings(
    mode="quick", steps=12, warmup=3, repeats=1, intervals=(1, 10, 100),
    read_steps=4, read_repeats=1, worker_timeout_s=300.0,
)


def smdebug_python(explicit: str | None = None) -> Path | None:
    """The side virtualenv's python: --smdebug-python, else $SDLOCAL_SMDEBUG_PYTHON, else the
    usual places; None when there is none."""
    chosen = explicit or os.environ.get("SDLOCAL_SMDEBUG_PYTHON")
    if chosen:
        return Path(chosen)
    for candidate in SIDE_VENV_CANDIDATES:
        if candidate.exists():
            return candidate
    return None


def smdebug_fast_python() -> Path | None:
    """smdebug on a compiled protobuf: $SDLOCAL_SMDEBUG_FAST_PYTHON, else the upb side virtualenv
    (`python benchmarks/smdebug_upb.py --make`) when it is there; None otherwise."""
    chosen = os.environ.get("SDLOCAL_SMDEBUG_FAST_PYTHON")
    if chosen:
        return Path(chosen)
    return UPB_VENV_PYTHON if UPB_VENV_PYTHON.exists() else None


def our_python() -> Path:
    return Path(sys.executable)


_BASELINE_PATHS: dict[Path, str] = {}


def baseline_pythonpath(root: Path, work: Path | None = None) -> str:
    """PYTHONPATH on which `sdlocal` (and the `smdebug` facade) come from the checkout at `root`:
    a folder `sdlocal/` of links to its top-level packages. For a checkout of the older layout
    (packages at the root, its `sdlocal/` holding only `__init__.py`) `root` itself on PYTHONPATH is
    not enough: an editable install of that layout maps `sdlocal.trial`, `sdlocal.hook`... onto its
    own checkout, so a "baseline" ran this checkout's code. The links work for both layouts (the
    root's names are symlinks into sdlocal/ now). Checked here."""
    import subprocess
    import tempfile

    root = root.resolve()
    if root in _BASELINE_PATHS:
        return _BASELINE_PATHS[root]
    work = Path(tempfile.mkdtemp(prefix="sdlocal-baseline-")) if work is None else work
    shim = work / "baseline-path" / "sdlocal"
    shim.mkdir(parents=True, exist_ok=True)
    (shim / "__init__.py").write_bytes((root / "sdlocal" / "__init__.py").read_bytes())
    for name in ("trial", "hook", "evaluator", "launcher"):
        if not (shim / name).exists():
            (shim / name).symlink_to(root / name)
    path = os.pathsep.join([str(shim.parent), str(root / "compat")])
    probe = subprocess.run([sys.executable, "-c", "import sdlocal.hook, sdlocal.trial, smdebug; "
                            "print(sdlocal.hook.__file__); print(sdlocal.trial.__file__); print(smdebug.__file__)"],
                           env={**os.environ, "PYTHONPATH": path}, cwd=work, capture_output=True, text=True)
    files = probe.stdout.split()
    if probe.returncode != 0 or len(files) != 3 or not all(os.path.realpath(f).startswith(str(root)) for f in files):
        raise BenchmarkError(f"--baseline-root {root}: its packages are not the ones imported: {probe.stdout}"
                             f"{probe.stderr[-2000:]}")
    _BASELINE_PATHS[root] = path
    return path
