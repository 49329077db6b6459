"""How sdlocal's `smdebug` package is found: in a wheel install it comes with a .pth that appends
its folder after site-packages, so a real smdebug installed there wins; sdlocal's own processes
put it first (trial.smdebug_shim)."""
from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

import pytest

from sdlocal.trial.smdebug_shim import compat_dir
from tests.conftest import REPO_ROOT

FIND = (
    "import importlib.util, sys; spec = importlib.util.find_spec('smdebug'); "
    "print(spec.origin if spec else None)"
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(out), str(REPO_ROOT)], check=True)
    (whl,) = out.glob("sdlocal-*.whl")
    return whl


@pytest.fixture
def bare_venv(tmp_path: Path) -> Path:
    """A venv without the system site-packages (so this checkout's editable install is not seen)."""
    venv.EnvBuilder(with_pip=True).create(tmp_path / "venv")
    return tmp_path / "venv"


def _python(env: Path) -> str:
    return str(env / "bin" / "python")


def _site_packages(env: Path) -> Path:
    out = subprocess.run([_python(env), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         check=True, capture_output=True, text=True)
    return Path(out.stdout.strip())


def _origin(env: Path) -> str:
    return subprocess.run([_python(env), "-c", FIND], check=True, capture_output=True, text=True,
                          cwd=env).stdout.strip()


def test_wheel_brings_smdebug_and_a_real_smdebug_wins(wheel: Path, bare_venv: Path) -> None:
    subprocess.run([_python(bare_venv), "-m", "pip", "install", "-q", "--no-deps", str(wheel)], check=True)
    site = _site_packages(bare_venv)
    assert (site / "sdlocal-smdebug.pth").is_file()
    assert _origin(bare_venv) == str(site / "sdlocal" / "compat" / "smdebug" / "__init__.py")

    real = site / "smdebug"  # what `pip install smdebug` puts there
    real.mkdir()
    (real / "__init__.py").write_text("REAL = True\n")
    assert _origin(bare_venv) == str(real / "__init__.py")


def test_this_environment_imports_sdlocal_smdebug(tmp_path: Path) -> None:
    code = (
        "import smdebug, smdebug.trials, smdebug.rules, smdebug.rules.rule, smdebug.exceptions, "
        "smdebug.core.modes, smdebug.core.collection, smdebug.profiler.utils, sys; "
        "assert smdebug.SDLOCAL; assert 'torch' not in sys.modules, 'smdebug must not import torch'; "
        "print(smdebug.__file__)"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=tmp_path)
    assert Path(out.stdout.strip()).parent.parent == compat_dir()


def test_use_sdlocal_smdebug_replaces_a_loaded_real_one(tmp_path: Path) -> None:
    real = tmp_path / "real" / "smdebug"
    real.mkdir(parents=True)
    (real / "__init__.py").write_text("REAL = True\n")
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import smdebug; assert smdebug.REAL; "
        "from sdlocal.trial.smdebug_shim import use_sdlocal_smdebug; use_sdlocal_smdebug(); "
        "import smdebug; from smdebug.trials import create_trial; print(smdebug.SDLOCAL)"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "real")], check=True,
                         capture_output=True, text=True, cwd=REPO_ROOT)
    assert out.stdout.strip() == "True"
