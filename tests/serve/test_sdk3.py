"""Issue 20 item 3: the SageMaker Python SDK v3 (sagemaker 3.27.0, its side virtualenv) against
`sdlocal serve`, given only the exports it printed (scripts/sdk3_jobs.py):

- ModelTrainer is constructed (its role resolved and validated through IAM/STS) and its job, a
  ContainerEntrypoint running the SDK's sm_train.sh with its drivers and code as channels, trains a
  torch model to Completed: the model in model.tar.gz, its TensorBoard output uploaded;
- TrainingJob.create with DebugHookConfig and LossNotDecreasing, in script mode and as a
  ContainerEntrypoint command (the zero-code hook in a script sdlocal does not start itself):
  wait(logs=True) shows the log, refresh() brings the rule's final status."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, missing

SCRIPT = Path(__file__).parent / "scripts" / "sdk3_jobs.py"
SOURCE = Path(__file__).parent / "scripts" / "v3_source"
SAGEMAKER3_PYTHON = Path(os.environ.get("SDLOCAL_SAGEMAKER3_PYTHON",
                                        str(REPO_ROOT / ".venv-sagemaker3" / "bin" / "python")))
pytestmark = pytest.mark.slow


@pytest.fixture
def sagemaker3_python() -> Path:
    """The side virtualenv's python with the real SageMaker Python SDK 3.27.0 (scripts/test makes it)."""
    if not SAGEMAKER3_PYTHON.exists():
        missing(f"SageMaker SDK v3 side virtualenv missing at {SAGEMAKER3_PYTHON}")
    return SAGEMAKER3_PYTHON


def _run(served: tuple[Path, dict[str, str]], sagemaker3_python: Path, tmp_path: Path) -> tuple[dict, str]:
    home, exports = served
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), **exports}  # nothing else of ours
    proc = subprocess.run([str(sagemaker3_python), str(SCRIPT), str(SOURCE)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    (tmp_path / "sdk-output.txt").write_text(out)
    assert proc.returncode == 0, out[-5000:]
    return json.loads(out.split("SDK-RESULT ", 1)[1].splitlines()[0]), out


def _check(home: Path, seen: dict, out: str) -> None:
    trainer = seen["trainer"]
    assert seen["trainer_role"] == "arn:aws:iam::123456789012:role/SageMakerExecutionRole"  # the caller's
    assert trainer["status"] == "Completed" and trainer["entrypoint"] == ["/bin/bash"]
    assert trainer["model"] == ["model.pt"]
    log = (home / "jobs" / trainer["name"] / "logs" / "training.log").read_text()
    # the script's own torch SummaryWriter, in the training image too
    assert "no TensorBoard writer" not in log
    assert any("tfevents" in key for key in trainer["tensorboard_keys"]), trainer
    assert "Running Basic Script driver" in log and "step 29 loss=" in log
    assert "Training Container Execution Completed" in log

    for key in ("script_mode", "entrypoint"):
        job = seen[key]
        assert job["status"] == "Completed", job
        assert job["rules"]["LossNotDecreasing"] in ("NoIssuesFound", "IssuesFound"), job
        # wait(logs=True) showed the training log
        assert f"{job['name']}/algo-1" in out and "step 29 loss=" in out
    # the request's MetricDefinitions read the log: FinalMetricDataList holds the last loss printed
    script_log = (home / "jobs" / seen["script_mode"]["name"] / "logs" / "training.log").read_text()
    last_loss = float(script_log.split("step 29 loss=", 1)[1].split()[0])
    assert seen["script_mode"]["final_metrics"] == {"train:loss": pytest.approx(last_loss)}
    assert seen["entrypoint"]["tensors"] >= 10  # saved by the zero-code hook (losses every 2 steps of 30)


def test_sdk_v3_scripts_process_runtime(served: tuple[Path, dict[str, str]], sagemaker3_python: Path,
                                        tmp_path: Path) -> None:
    seen, out = _run(served, sagemaker3_python, tmp_path)
    _check(served[0], seen, out)
    # sm_train.sh ran in the job folder (the process runtime's /opt/ml): its paths were rewritten
    assert not Path("/opt/ml/input/sm_training.env").exists()
    assert (served[0] / "jobs" / seen["trainer"]["name"] / "input" / "sm_training.env").is_file()


@pytest.mark.docker
def test_sdk_v3_scripts_docker_runtime(served_docker: tuple[Path, dict[str, str]], sagemaker3_python: Path,
                                       tmp_path: Path) -> None:
    seen, out = _run(served_docker, sagemaker3_python, tmp_path)
    _check(served_docker[0], seen, out)
