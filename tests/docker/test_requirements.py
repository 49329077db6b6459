"""`sdlocal run --runtime docker`: the code directory's requirements.txt is installed in the training
container before the entry point (hook/_requirements.py, as on the process runtime: a job
environment of the container's own that sees the image's packages), from a wheel shipped in the
code directory (`--no-index --find-links wheels`: the containers reach no package index here);
torch, in the image already, is not installed again. A requirements.txt pip cannot install fails
the training, its FailureReason naming requirements.txt."""
from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.hook.test_requirements import make_wheel
from tests.launcher._smjob import sdlocal
from tests.launcher.e2e.test_requirements_e2e import requirements_job

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _spec(tmp_path: Path, job: str, requirements: str) -> Path:
    """The process runtime test's job, with the wheel in its code folder (the container's --find-links)."""
    make_wheel(tmp_path / f"code-{job}" / "wheels", value="from the wheel")
    return requirements_job(tmp_path, job, requirements)


def test_requirements_txt_in_the_training_container(docker_client: Any, sdlocal_images: Any, moto_server: str,
                                                    tmp_path: Path) -> None:
    job = f"dk-req-{uuid.uuid4().hex[:6]}"
    spec = _spec(tmp_path, job, "--no-index\n--find-links wheels\nsdlocal-tinypkg==1.0\ntorch\n")
    result = sdlocal(["run", str(spec)], tmp_path, moto_server, runtime="docker")
    assert result.returncode == 0, result.stderr[-4000:]
    log = (tmp_path / "jobs" / job / "logs" / "training.log").read_text()
    assert "Requirement already satisfied: torch" in log and "Successfully installed sdlocal-tinypkg-1.0" in log
    assert "tinypkg says from the wheel from /tmp/sdlocal-requirements-env/" in log, log[-3000:]
    statuses = {r["RuleConfigurationName"]: r["RuleEvaluationStatus"] for r in json.loads(result.stdout)}
    assert statuses == {"LossNotDecreasing": "NoIssuesFound"}


def test_failed_requirements_fail_the_training(docker_client: Any, sdlocal_images: Any, moto_server: str,
                                               tmp_path: Path) -> None:
    job = f"dk-reqbad-{uuid.uuid4().hex[:6]}"
    spec = _spec(tmp_path, job, "--no-index\n--find-links wheels\nsdlocal-no-such-package==1.0\n")
    result = sdlocal(["run", str(spec)], tmp_path, moto_server, runtime="docker")
    assert result.returncode == 1
    assert "FailureReason: AlgorithmError: InstallRequirementsError:" in result.stderr
    assert "sdlocal-no-such-package" in result.stderr and "requirements.txt" in result.stderr
