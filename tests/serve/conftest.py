"""`sdlocal serve` started detached for a test (process runtime, its own SDLOCAL_HOME), and the side
virtualenv with the real SageMaker Python SDK (see scripts/test)."""
from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, missing
from tests.docker.conftest import sdlocal_images  # noqa: F401 - a fixture (served_docker asks for it by name)
from tests.helpers import run_sdlocal

SAGEMAKER_PYTHON = Path(os.environ.get("SDLOCAL_SAGEMAKER_PYTHON",
                                       str(REPO_ROOT / ".venv-sagemaker" / "bin" / "python")))


@pytest.fixture
def sagemaker_python() -> Path:
    """The side virtualenv's python with the real SageMaker Python SDK 2.257.7 (the last 2.x)."""
    if not SAGEMAKER_PYTHON.exists():
        missing(f"SageMaker SDK side virtualenv missing at {SAGEMAKER_PYTHON}")
    return SAGEMAKER_PYTHON


def sdlocal(home: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return run_sdlocal(*args, home=home, timeout=timeout)


def parse_exports(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if line.startswith("export "):
            key, _, value = line[len("export "):].partition("=")
            out[key] = value
    return out


def serve_background(home: Path, runtime: str = "process") -> Iterator[tuple[Path, dict[str, str]]]:
    """(SDLOCAL_HOME, the exports `sdlocal serve --background --runtime RUNTIME` printed); stopped afterwards."""
    started = sdlocal(home, "serve", "--background", "--port", "0", "--runtime", runtime)
    assert started.returncode == 0, started.stderr
    try:
        yield home, parse_exports(started.stdout)
    finally:
        stopped = sdlocal(home, "serve", "stop")
        assert stopped.returncode == 0, stopped.stderr
        log = home / "serve.log"
        if log.exists():
            print(log.read_text(errors="replace")[-8000:])


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """(SDLOCAL_HOME, the exports `sdlocal serve --background` printed); stopped afterwards."""
    yield from serve_background(tmp_path / "home")


@pytest.fixture
def served_docker(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[Path, dict[str, str]]]:
    """`served` with the docker runtime, once sdlocal's images exist (else skip, or fail under CI)."""
    request.getfixturevalue("sdlocal_images")
    yield from serve_background(tmp_path / "home", "docker")
