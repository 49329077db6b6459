"""One real profiled job that `sdlocal run` ran (process runtime, real hook and system sampler,
a real moto server as its S3): its profiler output in the job folder and in S3, for the analysis
API's tests (issue 21)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO_ROOT

pytest.importorskip("pandas", reason="the 'analysis' extra (pandas, bokeh) is part of the 'test' extra")
pytest.importorskip("bokeh", reason="the 'analysis' extra (pandas, bokeh) is part of the 'test' extra")

# what the job does: 300 TRAIN steps with an evaluation pass (5 EVAL steps) every 50, and a 6-s
# pause before step 120 so that the sampler writes several files and a slow step shows: the pause
# alone gives a dozen system samples (one per 500 ms) whatever the machine's speed (the 300 steps
# take 2-3 s on a quiet machine, several times that on a loaded one)
HYPERPARAMETERS = {"steps": "300", "eval-every": "50", "eval-batches": "5", "stall-at-step": "120",
                   "stall-seconds": "6"}


@dataclass(frozen=True)
class ProfiledJob:
    name: str
    local: Path  # <SDLOCAL_HOME>/jobs/<job>/output/profiler
    s3_uri: str  # s3://sdlocal/jobs/<job>/profiler-output
    endpoint: str  # the moto server's URL


@pytest.fixture(scope="session")
def profiled_job(tmp_path_factory: pytest.TempPathFactory, moto_server: str) -> ProfiledJob:
    home = tmp_path_factory.mktemp("analysis-home")
    name = f"analysis-{uuid.uuid4().hex[:6]}"
    spec = home / "job.yaml"
    spec.write_text(yaml.safe_dump({
        "EntryPoint": "train.py", "SourceDir": str(REPO_ROOT / "examples"), "HyperParameters": HYPERPARAMETERS,
        "DebugHookConfig": {"S3OutputPath": "s3://sdlocal/jobs"},
        "ProfilerConfig": {"S3OutputPath": "s3://sdlocal/jobs", "ProfilingIntervalInMilliseconds": 500},
    }))
    env = {**os.environ, "SDLOCAL_HOME": str(home), "SDLOCAL_RUNTIME": "process"}
    for key in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        env.pop(key, None)
    proc = subprocess.run([sys.executable, "-m", "sdlocal", "run", str(spec), "--job-name", name,
                           "--s3-endpoint-url", moto_server, "--json"], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Training completed" in proc.stderr, proc.stderr[-3000:]
    json.loads(proc.stdout)  # the statuses (no rules): the run's JSON, as `sdlocal run --json` prints it
    local = home / "jobs" / name / "output" / "profiler"
    assert list(local.glob("system/incremental/*/*.json")) and list(local.glob("framework/pevents/*/*.json"))
    return ProfiledJob(name, local, f"s3://sdlocal/jobs/{name}/profiler-output", moto_server)


@pytest.fixture
def s3_env(profiled_job: ProfiledJob, monkeypatch: pytest.MonkeyPatch) -> str:
    """The user's endpoint setting for S3 (as `sdlocal s3 env` / `sdlocal serve` print it)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", profiled_job.endpoint)
    return profiled_job.endpoint
