"""A training folder that holds trial.py, hook.py, evaluator.py, launcher.py and smdebug_rules.py
(names common in ML code) runs as any other: sdlocal's modules live under sdlocal.*, so the user's
files, first on the training's sys.path, shadow nothing of it (before: every job failed before step
0 with "No module named 'trial.collection'; 'trial' is not a package"). The docker runtime's twin is
tests/docker/test_user_module_names.py."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
USER_FOLDER = Path(__file__).parents[1] / "data" / "user_modules"
pytestmark = pytest.mark.slow


def user_folder(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    shutil.copytree(USER_FOLDER, src)
    shutil.copy(REPO / "examples" / "train.py", src / "mlp.py")
    return src


def run_user_job(src: Path, home: Path, endpoint: str, *extra: str) -> tuple[int, str, dict[str, str], str]:
    job = f"usermods-{uuid.uuid4().hex[:6]}"
    env = {**os.environ, "SDLOCAL_HOME": str(home)}
    env.pop("AWS_ENDPOINT_URL_S3", None)
    proc = subprocess.run(
        [sys.executable, "-m", "sdlocal", "run", "--entry-point", "train.py", "--source-dir", str(src),
         "--job-name", job, "-p", "steps=30", "--hook-param", "save_interval=2",
         "--rule", "LossNotDecreasing", "--rule-param", "num_steps=6",
         "--custom-rule", f"{src / 'smdebug_rules.py'}:LossIsFinite",
         "--s3-endpoint-url", endpoint, "--json", *extra],
        cwd=src, env=env, capture_output=True, text=True, timeout=600)
    statuses = {s["RuleConfigurationName"]: s["RuleEvaluationStatus"] for s in json.loads(proc.stdout or "[]")}
    log = (home / "jobs" / job / "logs" / "training.log").read_text(errors="replace")
    return proc.returncode, proc.stderr, statuses, log


def test_a_job_beside_modules_named_like_sdlocals_gets_its_verdicts(tmp_path: Path, moto_server: str) -> None:
    code, err, statuses, log = run_user_job(user_folder(tmp_path), tmp_path / "home", moto_server,
                                            "--runtime", "process")
    assert code == 0, err
    assert "Training completed" in err
    assert "the user's own modules: trial, hook, evaluator, launcher, smdebug_rules" in log
    assert statuses == {"LossNotDecreasing": "NoIssuesFound", "LossIsFinite": "NoIssuesFound"}
