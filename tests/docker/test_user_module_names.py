"""The docker runtime's twin of tests/launcher/e2e/test_user_module_names.py: the training container
runs the user's folder (trial.py, hook.py, evaluator.py, launcher.py, smdebug_rules.py beside the
entry point) and the job gets its verdicts."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.docker.conftest import SdlocalImages
from tests.launcher.e2e.test_user_module_names import run_user_job, user_folder

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_a_container_job_beside_modules_named_like_sdlocals(tmp_path: Path, moto_server: str,
                                                             sdlocal_images: SdlocalImages) -> None:
    code, err, statuses, log = run_user_job(user_folder(tmp_path), tmp_path / "home", moto_server,
                                            "--runtime", "docker")
    assert code == 0, err
    assert "Training completed" in err
    assert "the user's own modules: trial, hook, evaluator, launcher, smdebug_rules" in log
    assert statuses == {"LossNotDecreasing": "NoIssuesFound", "LossIsFinite": "NoIssuesFound"}
