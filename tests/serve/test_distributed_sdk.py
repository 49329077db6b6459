"""Issue 19 from the SDK: an unchanged SageMaker Python SDK v2 script (the real SDK, in its side
virtualenv) runs a 2-host torch_distributed job with Debugger and profiler rules against `sdlocal
serve` (process runtime), and a distribution sdlocal does not run fails at fit() with the
ValidationException CreateTrainingJob answered."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.launcher import _distjob as dj

pytestmark = pytest.mark.slow
SCRIPT = Path(__file__).parent / "scripts" / "sdk_distributed_job.py"


def test_sdk_runs_a_two_host_torch_distributed_job(served, sagemaker_python: Path, tmp_path: Path) -> None:
    home, exports = served
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), **exports}  # nothing else of ours
    proc = subprocess.run([str(sagemaker_python), str(SCRIPT), str(dj.SCRIPT_DIR)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    (tmp_path / "sdk-output.txt").write_text(out)
    assert proc.returncode == 0, out[-5000:]
    seen = json.loads(out.split("SDK-RESULT ", 1)[1].splitlines()[0])
    assert seen["status"] == "Completed" and seen["instance_count"] == 2
    # fit(logs=True) showed both hosts' CloudWatch streams (<job>/algo-1-..., <job>/algo-2-...)
    for rank, host in ((0, "algo-1"), (1, "algo-1"), (2, "algo-2"), (3, "algo-2")):
        assert re.search(rf"rank {rank} of 4 \(local rank {rank % 2}\) on {host}", out), out[-4000:]
    assert set(seen["summary"]) == set(dj.RULES) and set(seen["summary"].values()) <= dj.FINAL, seen["summary"]
    assert seen["summary"]["LowGPUUtilization"] == "NoIssuesFound"
    # the trial at latest_job_debugger_artifacts_path(): every worker of both hosts
    dj.check_trial(seen["artifacts_path"].rsplit("/debug-output", 1)[0], exports["AWS_ENDPOINT_URL"], workers=4)
    job_dir = home / "jobs" / seen["job"]
    dj.check_logs(job_dir, {0: "algo-1", 1: "algo-1", 2: "algo-2", 3: "algo-2"})
    # a distribution sdlocal does not run: the SDK's fit() raised CreateTrainingJob's ValidationException
    assert seen["unsupported"]["code"] == "ValidationException"
    assert seen["unsupported"]["message"].startswith(
        "HyperParameters.sagemaker_parameter_server_enabled: the parameter_server distribution is TensorFlow's")
