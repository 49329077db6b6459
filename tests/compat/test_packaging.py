"""How sdlocal's `smdebug` package is found: in a wheel install it comes with a .pth that appends
its folder after site-packages, so a real smdebug installed there wins; sdlocal's own processes
put it first (trial.smdebug_shim)."""
from __future__ import annotations

import subprocess
import sys
import sysconfig
import venv
import zipfile
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


# ---- one installed namespace: sdlocal.* (and the smdebug facade), nothing else --------------------

OLD_TOP_LEVEL = ("trial", "hook", "evaluator", "launcher")
IMPORTS = ("import sdlocal, sdlocal.trial, sdlocal.hook.run, sdlocal.evaluator.__main__, sdlocal.launcher.cli, "
           "sdlocal.launcher.serve.app, smdebug.trials; print(sdlocal.__file__)")


def _not_importable(python: str, cwd: Path) -> list[str]:
    """The old top-level names that import (none may)."""
    code = ("import importlib, sys\nfound = []\nfor name in sys.argv[1:]:\n    try:\n        importlib.import_module(name)\n"
            "    except ModuleNotFoundError:\n        continue\n    found.append(name)\nprint(' '.join(found))")
    out = subprocess.run([python, "-c", code, *OLD_TOP_LEVEL], check=True, capture_output=True, text=True, cwd=cwd)
    return out.stdout.split()


def test_this_installation_has_one_namespace(tmp_path: Path) -> None:
    """This environment's install of the checkout (editable in CI): sdlocal.* maps onto the
    repository's folders; `import trial` and the other old names fail."""
    out = subprocess.run([sys.executable, "-c", IMPORTS], check=True, capture_output=True, text=True, cwd=tmp_path)
    assert Path(out.stdout.strip()).parent.name == "sdlocal"
    assert _not_importable(sys.executable, tmp_path) == []
    cli = subprocess.run([sys.executable, "-m", "sdlocal", "--help"], capture_output=True, text=True, cwd=tmp_path)
    assert cli.returncode == 0 and "Usage: sdlocal" in cli.stdout


def test_sdist_to_wheel_installs_the_namespace(tmp_path: Path) -> None:
    """sdist -> wheel (how a package index builds it): the folders land under sdlocal/, the
    smdebug facade under sdlocal/compat with its .pth; no old top-level name is installed."""
    subprocess.run([sys.executable, "-m", "hatchling", "build", "-t", "sdist", "-d", str(tmp_path / "dist")],
                   check=True, capture_output=True, cwd=REPO_ROOT)
    (sdist,) = (tmp_path / "dist").glob("sdlocal-*.tar.gz")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(tmp_path / "wheel"), str(sdist)], check=True, capture_output=True)
    (whl,) = (tmp_path / "wheel").glob("sdlocal-*.whl")
    with zipfile.ZipFile(whl) as zf:
        tops = {name.split("/", 1)[0] for name in zf.namelist()}
        names = set(zf.namelist())
    assert tops == {"sdlocal", "sdlocal-smdebug.pth", f"{whl.name.split('-')[0]}-{whl.name.split('-')[1]}.dist-info"}
    for must in ("sdlocal/trial/trial.py", "sdlocal/hook/run.py", "sdlocal/evaluator/__main__.py",
                 "sdlocal/launcher/cli/__init__.py", "sdlocal/launcher/job/run.py", "sdlocal/compat/smdebug/__init__.py"):
        assert must in names, must
    # installed in a venv that sees this environment's packages for the dependencies (a folder on
    # its path: the .pth files there, this checkout's editable install among them, are not run)
    env = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env)
    (_site_packages(env) / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([_python(env), "-m", "pip", "install", "-q", "--no-deps", str(whl)], check=True)
    out = subprocess.run([_python(env), "-c", IMPORTS], check=True, capture_output=True, text=True, cwd=tmp_path)
    assert Path(out.stdout.strip()).parent == _site_packages(env) / "sdlocal"
    assert _not_importable(_python(env), tmp_path) == []
