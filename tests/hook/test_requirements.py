"""hook/_requirements.py: the code directory's requirements.txt is installed with pip into a per-job
environment that sees the training Python's packages (what is satisfied is not installed again),
never into the Python running the tests; a failure is the toolkit's InstallRequirementsError. The
package is a wheel built here (no network: `--no-index --find-links`)."""
from __future__ import annotations

import base64
import hashlib
import importlib.util
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from sdlocal.hook import _requirements
from sdlocal.hook._requirements import RequirementsError, create_environment, install

PACKAGE = "sdlocal_tinypkg"


def make_wheel(folder: Path, version: str = "1.0", value: str = "42") -> Path:
    """A pure-Python wheel of `sdlocal-tinypkg` whose module holds VALUE."""
    folder.mkdir(parents=True, exist_ok=True)
    dist = f"{PACKAGE}-{version}.dist-info"
    files = {
        f"{PACKAGE}/__init__.py": f"VALUE = {value!r}\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: sdlocal-tinypkg\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: sdlocal-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = "\n".join(record) + "\n"
    path = folder / f"{PACKAGE}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return path


def not_in_this_python() -> None:
    """The Python running the tests never gets the package."""
    assert importlib.util.find_spec(PACKAGE) is None
    shown = subprocess.run([sys.executable, "-m", "pip", "show", "sdlocal-tinypkg"], capture_output=True, text=True,
                           timeout=120)
    assert shown.returncode != 0 and "not found" in shown.stderr.lower()


def test_install_into_the_jobs_environment(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    wheels = tmp_path / "wheels"
    make_wheel(wheels)
    code = tmp_path / "code"
    code.mkdir()
    (code / "requirements.txt").write_text(f"--no-index\n--find-links {wheels}\nsdlocal-tinypkg==1.0\nnumpy\n")
    python = create_environment(tmp_path / "env")
    install(code, python)
    out = capfd.readouterr().out
    assert "Installing dependencies from requirements.txt:" in out and "-m pip install -r requirements.txt" in out
    assert "Requirement already satisfied: numpy" in out  # the training Python's numpy, not installed again
    assert "Successfully installed sdlocal-tinypkg-1.0" in out
    probe = ("import json, numpy, sdlocal_tinypkg; "
             "print(json.dumps([sdlocal_tinypkg.VALUE, sdlocal_tinypkg.__file__, numpy.__file__]))")
    seen = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, timeout=120)
    assert seen.returncode == 0, seen.stderr
    value, pkg_file, numpy_file = __import__("json").loads(seen.stdout)
    assert value == "42" and pkg_file.startswith(str(tmp_path / "env"))
    assert numpy_file == __import__("numpy").__file__  # seen through the training Python's site-packages
    not_in_this_python()


def test_a_different_version_in_the_job_environment_comes_first(tmp_path: Path) -> None:
    """The training Python has version 1.0 (a second environment stands for it); the job asks for
    2.0: installed into the job's environment, which wins; the training Python keeps 1.0."""
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "1.0", "old")
    make_wheel(wheels, "2.0", "new")
    host = tmp_path / "host"
    subprocess.run([sys.executable, "-m", "venv", str(host)], check=True, timeout=120)
    host_python = host / "bin" / "python"
    # it sees this environment's packages (sdlocal's install included: its .pth files are processed),
    # as the training Python sees its own
    purelib = subprocess.run([str(host_python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (Path(purelib) / "this-environment.pth").write_text(
        f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    subprocess.run([str(host_python), "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheels),
                    "sdlocal-tinypkg==1.0"], check=True, timeout=300)
    code = tmp_path / "code"
    code.mkdir()
    (code / "requirements.txt").write_text(f"--no-index\n--find-links {wheels}\nsdlocal-tinypkg==2.0\n")
    probe = ("from sdlocal.hook._requirements import create_environment, install; from pathlib import Path; import sys; "
             f"install(Path({str(code)!r}), create_environment(Path({str(tmp_path / 'env')!r})))")
    ran = subprocess.run([str(host_python), "-c", probe], capture_output=True, text=True, timeout=300,
                         cwd=Path(__file__).resolve().parents[2])
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "Successfully installed sdlocal-tinypkg-2.0" in ran.stdout
    value = "import sdlocal_tinypkg; print(sdlocal_tinypkg.VALUE)"
    job_python = tmp_path / "env" / "bin" / "python"
    assert subprocess.run([str(job_python), "-c", value], capture_output=True, text=True).stdout.strip() == "new"
    assert subprocess.run([str(host_python), "-c", value], capture_output=True, text=True).stdout.strip() == "old"


def test_a_failed_install_is_the_toolkits_error(tmp_path: Path) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / "requirements.txt").write_text("--no-index\nsdlocal-no-such-package==1.0\n")
    with pytest.raises(RequirementsError) as info:
        install(code, create_environment(tmp_path / "env"))
    text = str(info.value)
    assert text.startswith("InstallRequirementsError:\nExitCode 1\nErrorMessage \"ERROR: ")
    assert "sdlocal-no-such-package" in text and text.endswith('-m pip install -r requirements.txt"')


def test_outside_a_job_nothing_is_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "requirements.txt").write_text("sdlocal-no-such-package\n")
    monkeypatch.delenv("TRAINING_JOB_NAME", raising=False)
    assert _requirements.prepare(["train.py"], tmp_path) is None
    # in a job, under the process runtime: the job folder's environment; a failure writes the failure file
    job = tmp_path / "job"
    monkeypatch.setenv("TRAINING_JOB_NAME", "j")
    monkeypatch.setenv("SM_INPUT_DIR", str(job / "input"))
    monkeypatch.setenv("SM_OUTPUT_DIR", str(job / "output"))
    (tmp_path / "requirements.txt").write_text("--no-index\nsdlocal-no-such-package\n")
    assert _requirements.environment_folder() == job / "requirements-env"
    assert _requirements.prepare(["train.py"], tmp_path) == 1
    assert (job / "output" / "failure").read_text().startswith("InstallRequirementsError:")
    # the docker runtime: the container's /opt/ml is not writable, a folder of the container's own
    monkeypatch.setenv("SM_INPUT_DIR", "/opt/ml/input")
    folder = _requirements.environment_folder()
    assert folder is not None and not str(folder).startswith("/opt/ml")
