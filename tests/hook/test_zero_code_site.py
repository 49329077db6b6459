"""hook/zero_code/sitecustomize.py: the zero-code hook attached at the interpreter's start in the
Python processes a container command starts (`python train.py`), not in the SDK's drivers, not in
`-c` processes; a bad hook config fails the script with exit code 2 and one line."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sdlocal.hook.zero_code import site_dir
from sdlocal.trial import create_trial

SCRIPT = """
import torch
model = torch.nn.Linear(4, 1)
loss_fn = torch.nn.MSELoss()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(32, 4), torch.randn(32, 1)
for _ in range(6):
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
print("trained")
"""


def _run(tmp_path: Path, script: Path, config: dict | None, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "SMDEBUG", "SMPROFILER", "TENSORBOARD"))}
    env.update(TRAINING_JOB_NAME="zero-code-site", PYTHONPATH=str(site_dir()),
               SMPROFILER_CONFIG_PATH=str(tmp_path / "no-profiler.json"),
               TENSORBOARD_CONFIG_FILE_PATH=str(tmp_path / "no-tensorboard.json"))
    if config is not None:
        (tmp_path / "debughookconfig.json").write_text(json.dumps(config))
        env["SMDEBUG_CONFIG_FILE_PATH"] = str(tmp_path / "debughookconfig.json")
    return subprocess.run([sys.executable, *args, str(script)], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)


def _config(tmp_path: Path, **extra: object) -> dict:
    return {"LocalPath": str(tmp_path / "tensors"), "HookParameters": {"save_interval": "1"},
            "CollectionConfigurations": [{"CollectionName": "losses"}], **extra}


@pytest.mark.slow
def test_a_training_script_gets_the_hook_a_driver_does_not(tmp_path: Path) -> None:
    script = tmp_path / "code" / "train.py"
    script.parent.mkdir()
    script.write_text(SCRIPT)
    done = _run(tmp_path, script, _config(tmp_path))
    assert done.returncode == 0 and "trained" in done.stdout, done.stderr
    trial = create_trial(str(tmp_path / "tensors"))
    assert trial.training_ended() and len(trial.steps()) == 6
    assert any("loss" in name.lower() for name in trial.tensor_names())

    # the SDK's drivers (the sm_drivers channel) start the script; they get no hook of their own
    driver = tmp_path / "input" / "data" / "sm_drivers" / "driver.py"
    driver.parent.mkdir(parents=True)
    driver.write_text(SCRIPT)
    config = _config(tmp_path)
    config["LocalPath"] = str(tmp_path / "driver-tensors")
    assert _run(tmp_path, driver, config).returncode == 0
    assert not (tmp_path / "driver-tensors").exists()


def test_bad_config_fails_the_script_in_one_line(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("print('should not run')\n")
    done = _run(tmp_path, script, _config(tmp_path, HookParameters={"save_interval": "-5"}))
    assert done.returncode == 2 and "should not run" not in done.stdout
    assert "bad hook config" in done.stderr and "Fatal Python error" not in done.stderr, done.stderr


def test_no_job_no_hook(tmp_path: Path) -> None:
    """`python -c` and processes outside a job run unchanged."""
    env = {**os.environ, "PYTHONPATH": str(site_dir())}
    env.pop("TRAINING_JOB_NAME", None)
    done = subprocess.run([sys.executable, "-c", "import sys; print('sdlocal.hook.run' in sys.modules)"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "False", done.stderr
