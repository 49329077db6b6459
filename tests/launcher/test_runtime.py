"""ProcessRuntime: the launch options, environment contract, and stop leaving nothing behind."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from launcher.runtime import ProcessRuntime, RuleLaunch, TrainingLaunch, wait_all
from tests.launcher._procs import gone

CHILD = """
import json, os, signal, subprocess, sys, time
if os.environ.get("IGNORE_TERM"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
with open(os.environ["PIDS_FILE"], "w") as f:
    json.dump({"child": os.getpid(), "grandchild": grandchild.pid, "argv": sys.argv[1:], "cwd": os.getcwd(),
               "env": {k: v for k, v in os.environ.items() if k.startswith(("SDLOCAL_", "SM", "TRAINING", "TENSOR"))}}, f)
print("child started", flush=True)
time.sleep(120)
"""


@pytest.fixture
def fake_python(tmp_path: Path) -> str:
    """An interpreter stand-in: runs CHILD whatever module it is asked for (hook.run, evaluator)."""
    (tmp_path / "child.py").write_text(CHILD)
    script = tmp_path / "fakepython"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} {tmp_path / 'child.py'} \"$@\"\n")
    script.chmod(0o755)
    return str(script)


def wait_for(path: Path, timeout: float = 20.0) -> dict:  # type: ignore[type-arg]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text():
            return json.loads(path.read_text())  # type: ignore[no-any-return]
        time.sleep(0.05)
    raise AssertionError(f"{path} not written")


def training_launch(tmp_path: Path) -> TrainingLaunch:
    cfg = tmp_path / "config"
    cfg.mkdir(exist_ok=True)
    (cfg / "debughookconfig.json").write_text("{}")
    return TrainingLaunch(
        job_name="j", entry_point="train.py", source_dir=tmp_path, hyperparameters=(("lr", "0.1"), ("steps", "3")),
        config_dir=cfg, model_dir=tmp_path / "model", log_path=tmp_path / "logs" / "training.log",
        env=(("PIDS_FILE", str(tmp_path / "pids.json")),),
    )


@pytest.mark.parametrize("ignore_term", [False, True])
def test_training_stop_leaves_nothing_behind(tmp_path: Path, fake_python: str, ignore_term: bool) -> None:
    runtime = ProcessRuntime(python=fake_python, base_env={**os.environ, "IGNORE_TERM": "1" if ignore_term else ""})
    handle = runtime.start_training(training_launch(tmp_path))
    info = wait_for(tmp_path / "pids.json")
    assert info["argv"] == ["-m", "hook.run", "train.py", "--lr", "0.1", "--steps", "3"]
    assert info["cwd"] == str(tmp_path)
    assert info["env"]["SMDEBUG_CONFIG_FILE_PATH"] == str(tmp_path / "config" / "debughookconfig.json")
    assert "SMPROFILER_CONFIG_PATH" not in info["env"]  # no profilerconfig.json written
    assert info["env"]["TRAINING_JOB_NAME"] == "j" and info["env"]["SM_MODEL_DIR"] == str(tmp_path / "model")
    assert handle.poll() is None and handle.wait(0.1) is None
    handle.stop(grace=0.5)
    assert handle.poll() is not None
    deadline = time.monotonic() + 10
    while not (gone(info["child"]) and gone(info["grandchild"])) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone(info["child"]) and gone(info["grandchild"])
    assert "child started" in handle.logs()


def test_rule_env_contract(tmp_path: Path, fake_python: str) -> None:
    launch = RuleLaunch(
        job_name="j", rule_name="VG", rule_parameters=(("rule_to_invoke", "VanishingGradient"), ("threshold", "1")),
        debug_output="s3://b/p/j/debug-output", rule_output="s3://b/p/j/rule-output/VG",
        log_path=tmp_path / "logs" / "rule-VG.log", poll_interval_s=0.5,
        env=(("PIDS_FILE", str(tmp_path / "pids.json")), ("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:1")),
    )
    handle = ProcessRuntime(python=fake_python).start_rule(launch)
    try:
        info = wait_for(tmp_path / "pids.json")
    finally:
        handle.stop(grace=1)
    assert info["argv"] == ["-m", "evaluator"]
    env = info["env"]
    assert json.loads(env["SDLOCAL_RULE_PARAMETERS"]) == {"rule_to_invoke": "VanishingGradient", "threshold": "1"}
    assert env["SDLOCAL_DEBUG_OUTPUT"] == "s3://b/p/j/debug-output"
    assert env["SDLOCAL_RULE_OUTPUT"] == "s3://b/p/j/rule-output/VG"
    assert env["SDLOCAL_RULE_CONFIGURATION_NAME"] == "VG" and env["SDLOCAL_JOB_NAME"] == "j"
    assert env["SDLOCAL_POLL_INTERVAL_S"] == "0.5" and "SDLOCAL_DEADLINE_S" not in env


def test_wait_all_and_exit_codes(tmp_path: Path) -> None:
    script = tmp_path / "py"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} -c 'import sys; sys.exit(3)'\n")
    script.chmod(0o755)
    runtime = ProcessRuntime(python=str(script))
    handles = [runtime.start_training(training_launch(tmp_path)) for _ in range(2)]
    assert wait_all(list(handles), timeout=30)
    assert [h.poll() for h in handles] == [3, 3]
