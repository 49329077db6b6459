"""End to end: `sdlocal run` (as a subprocess) the example job with the real hook and evaluators
against a real moto server; stopping it midway; training killed midway."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import start_sdlocal

REPO = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.slow
FINAL = {"IssuesFound", "NoIssuesFound", "Error", "Stopped"}


def sdlocal(args: list[str], home: Path, moto_server: str) -> subprocess.Popen[str]:
    return start_sdlocal(*args, "--s3-endpoint-url", moto_server, "--json", home=home, runtime=None)


def job_pids(job: str) -> list[int]:
    """Processes started for this job (training and evaluators carry the job name in their environment)."""
    markers = (f"TRAINING_JOB_NAME={job}".encode(), f"SDLOCAL_JOB_NAME={job}".encode())
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
            state = (proc / "status").read_text()
        except OSError:
            continue
        if any(m in environ for m in markers) and "zombie" not in state:
            pids.append(int(proc.name))
    return pids


def not_uploaded(s3_client: Any, job_dir: Path, job: str) -> list[str]:
    """The job's tensor files (the hook's output in the job folder) missing from its debug-output."""
    local = job_dir / "output" / "tensors"
    files = {p.relative_to(local).as_posix() for p in local.rglob("*")
             if p.is_file() and not p.name.endswith(".tmp") and p.name != ".sdlocal-steps.json"}  # (for the launcher)
    pages = s3_client.get_paginator("list_objects_v2").paginate(Bucket="sdlocal", Prefix=f"jobs/{job}/debug-output/")
    stored = {o["Key"].split("/debug-output/", 1)[1] for page in pages for o in page.get("Contents", [])}
    assert files, f"no tensor file in {local}"
    return sorted(files - stored)


def wait_for_text(path: Path, text: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        time.sleep(0.2)
    raise AssertionError(f"{text!r} never appeared in {path}")


def test_example_job_with_three_rules(tmp_path: Path, moto_server: str, s3_client: Any) -> None:
    healthy, exploding = f"e2e-ok-{uuid.uuid4().hex[:6]}", f"e2e-boom-{uuid.uuid4().hex[:6]}"
    procs = {
        healthy: sdlocal(["run", "examples/job.yaml", "--job-name", healthy], tmp_path, moto_server),
        exploding: sdlocal(["run", "examples/job.yaml", "--job-name", exploding, "-p", "lr=1e5"], tmp_path, moto_server),
    }
    results = {job: p.communicate(timeout=400) for job, p in procs.items()}
    for job, (_out, err) in results.items():
        assert procs[job].returncode == 0, err
        assert "Training completed" in err
    ok = {s["RuleConfigurationName"]: s["RuleEvaluationStatus"] for s in json.loads(results[healthy][0])}
    boom = {s["RuleConfigurationName"]: s["RuleEvaluationStatus"] for s in json.loads(results[exploding][0])}
    assert list(ok) == ["VanishingGradient", "ExplodingTensor", "LossNotDecreasing"]
    assert ok == {"VanishingGradient": "NoIssuesFound", "ExplodingTensor": "NoIssuesFound",
                  "LossNotDecreasing": "NoIssuesFound"}
    assert boom["ExplodingTensor"] == "IssuesFound" and set(boom.values()) <= FINAL
    # the layout of a SageMaker job, and `sdlocal summary` after `run` returned
    keys = [o["Key"] for o in s3_client.list_objects_v2(Bucket="sdlocal", Prefix=f"jobs/{healthy}/")["Contents"]]
    assert f"jobs/{healthy}/debug-output/training_job_end.ts" in keys
    assert any(k.startswith(f"jobs/{healthy}/debug-output/index/") for k in keys)
    assert f"jobs/{healthy}/rule-output/ExplodingTensor/status.json" in keys
    summary = sdlocal(["summary", healthy], tmp_path, moto_server)
    out, err = summary.communicate(timeout=60)
    assert summary.returncode == 0, err
    # run --json and summary --json both print rule_job_summary()'s shape: the same rows, field for field
    assert json.loads(out) == json.loads(results[healthy][0])
    assert all(list(r)[:3] == ["RuleConfigurationName", "RuleEvaluationJobArn", "RuleEvaluationStatus"]
               and "LastEvaluatedStep" not in r for r in json.loads(out))
    assert not job_pids(healthy) and not job_pids(exploding)


def test_ctrl_c_midway_stops_everything(tmp_path: Path, moto_server: str, s3_client: Any) -> None:
    job = f"e2e-stop-{uuid.uuid4().hex[:6]}"
    proc = sdlocal(["run", "examples/job.yaml", "--job-name", job, "-p", "steps=100000"], tmp_path, moto_server)
    try:
        wait_for_text(tmp_path / "jobs" / job / "logs" / "training.log", "step 10 ")
        assert len(job_pids(job)) == 4  # training + 3 evaluators
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert {s["RuleEvaluationStatus"] for s in json.loads(out)} == {"Stopped"}
    s3_client.head_object(Bucket="sdlocal", Key=f"jobs/{job}/debug-output/training_job_end.ts")
    assert not job_pids(job)
    assert not_uploaded(s3_client, tmp_path / "jobs" / job, job) == []  # nothing lost


def test_training_killed_midway_fails_the_job(tmp_path: Path, moto_server: str, s3_client: Any) -> None:
    job = f"e2e-kill-{uuid.uuid4().hex[:6]}"
    proc = sdlocal(["run", "examples/job.yaml", "--job-name", job, "-p", "steps=100000"], tmp_path, moto_server)
    try:
        wait_for_text(tmp_path / "jobs" / job / "logs" / "training.log", "step 10 ")
        training = [p for p in job_pids(job) if b"sdlocal.hook.run" in Path(f"/proc/{p}/cmdline").read_bytes()]
        assert len(training) == 1
        os.kill(training[0], signal.SIGKILL)
        killed_at = time.monotonic()
        out, err = proc.communicate(timeout=300)
        took = time.monotonic() - killed_at
    finally:
        proc.kill()
    assert proc.returncode == 1, err
    assert "Training failed" in err
    # the end marker is written when training fails; the evaluators evaluate the data there is and
    # reach a real verdict (not Error, not Stopped), promptly: within a few polling intervals
    s3_client.head_object(Bucket="sdlocal", Key=f"jobs/{job}/debug-output/training_job_end.ts")
    statuses = json.loads(out)
    assert len(statuses) == 3
    assert {s["RuleEvaluationStatus"] for s in statuses} <= {"IssuesFound", "NoIssuesFound"}, statuses
    assert took < 60, f"rules took {took:.0f}s to finish after training was killed"
    assert not job_pids(job)
    assert not_uploaded(s3_client, tmp_path / "jobs" / job, job) == []  # nothing lost


def test_job_as_the_sdk_builds_it_samples_the_system_until_ctrl_c(tmp_path: Path, moto_server: str,
                                                                  s3_client: Any) -> None:
    """The SDK's default ProfilerConfig and ProfilerReport beside a Debugger rule: the system is
    sampled into the job folder and uploaded while training runs; Ctrl-C stops the sampler with
    its last file closed and uploaded, and the profiler end markers are written."""
    job = f"e2e-prof-{uuid.uuid4().hex[:6]}"
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps({
        "EntryPoint": "train.py", "SourceDir": str(REPO / "examples"), "HyperParameters": {"steps": "100000"},
        "DebugHookConfig": {"S3OutputPath": "s3://sdlocal/jobs"},
        "DebugRuleConfigurations": [{"RuleConfigurationName": "LossNotDecreasing",
                                     "RuleParameters": {"rule_to_invoke": "LossNotDecreasing"}}],
        "ProfilerConfig": {"S3OutputPath": "s3://sdlocal/jobs", "ProfilingIntervalInMilliseconds": 500},
        "ProfilerRuleConfigurations": [{"RuleConfigurationName": "ProfilerReport",
                                        "RuleParameters": {"rule_to_invoke": "ProfilerReport"}}],
    }))
    prefix = f"jobs/{job}/profiler-output/"
    proc = sdlocal(["run", str(spec), "--job-name", job], tmp_path, moto_server)

    def uploaded_system_files() -> int:
        try:
            return int(s3_client.list_objects_v2(Bucket="sdlocal", Prefix=prefix + "system/incremental/")["KeyCount"])
        except s3_client.exceptions.NoSuchBucket:  # the launcher creates it
            return 0

    try:
        deadline = time.monotonic() + 180
        while not uploaded_system_files():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1]
            time.sleep(0.2)
        wait_for_text(tmp_path / "jobs" / job / "logs" / "training.log", "step 10 ")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "System metrics of this host every 500 ms" in err
    assert "not evaluated yet" not in err
    assert [(s["RuleConfigurationName"], s["RuleEvaluationStatus"]) for s in json.loads(out)] == [
        ("LossNotDecreasing", "Stopped"), ("ProfilerReport", "Stopped")]
    stored = {o["Key"][len(prefix):] for o in s3_client.list_objects_v2(Bucket="sdlocal", Prefix=prefix)["Contents"]}
    assert {"system/training_job_end.ts", "framework/training_job_end.ts"} <= stored
    local = tmp_path / "jobs" / job / "output" / "profiler"
    files = {p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file()}
    assert files and not [f for f in files if f.endswith(".tmp")] and files <= stored
    tensors = tmp_path / "jobs" / job / "output" / "tensors"  # the stopped training finished its last step
    assert not [p for p in tensors.rglob("*.tmp")] and (tensors / "training_job_end.ts").is_file()
    assert not job_pids(job)


def verdicts_of(rows: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """What `run --json` and `summary --json` (rule_job_summary()'s shape) both say of each rule."""
    return [(r["RuleConfigurationName"], r["RuleEvaluationStatus"], r.get("StatusDetails") or "") for r in rows]
