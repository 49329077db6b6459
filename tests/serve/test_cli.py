"""`sdlocal serve` in the foreground: the exports and the SDK config file, a clean Ctrl-C;
`--background` twice and `serve stop` with nothing running."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import REPO_ROOT
from tests.serve.conftest import parse_exports, sdlocal


def test_foreground_prints_exports_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    env = {**os.environ, "SDLOCAL_HOME": str(tmp_path), "SDLOCAL_RUNTIME": "process"}
    proc = subprocess.Popen([sys.executable, "-m", "sdlocal", "serve", "--port", "0"], cwd=REPO_ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(5)]
        exports = parse_exports("".join(lines))
        assert exports["AWS_ENDPOINT_URL"].startswith("http://127.0.0.1:")
        assert exports["AWS_DEFAULT_REGION"] == "us-east-1"
        config = yaml.safe_load(Path(exports["SAGEMAKER_USER_CONFIG_OVERRIDE"]).read_text())
        modules = config["SageMaker"]["PythonSDK"]["Modules"]
        assert modules == {"Session": {"DefaultS3Bucket": "sdlocal"}, "TelemetryOptOut": True}
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "Traceback" not in err


def test_background_twice_and_stop(tmp_path: Path) -> None:
    assert sdlocal(tmp_path, "serve", "stop").stdout.strip() == "not running"
    first = sdlocal(tmp_path, "serve", "--background", "--port", "0")
    assert first.returncode == 0, first.stderr
    try:
        second = sdlocal(tmp_path, "serve", "--background", "--port", "0")
        assert second.returncode == 1
        assert second.stderr.count("\n") == 1 and "already runs at" in second.stderr
    finally:
        stopped = sdlocal(tmp_path, "serve", "stop")
    assert stopped.returncode == 0 and stopped.stdout.startswith("stopped sdlocal serve at")
