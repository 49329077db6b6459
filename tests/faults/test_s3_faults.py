"""S3 faults injected into real runs: `sdlocal run` of the example job (a subprocess, process runtime,
the real hook and three evaluators) against an S3 that is killed and started again empty, a frozen
one (SIGSTOP for longer than a minute), and the embedded S3 crashing. Each job must end as it would
have without the fault (exit 0, the same verdicts) with nothing lost: every closed file of the local
trial is in S3 with its size, the end marker is there, and every rule's final status is in S3. The
verdicts a fault must not change are the rules' verdicts on the complete local trial
(`sdlocal evaluate` of the job's output folder, with the job's rule parameters)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml

from tests.moto_process import MotoProcess

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow
JOB_SPEC = yaml.safe_load((REPO / "examples" / "job.yaml").read_text())
RULES = [r["RuleConfigurationName"] for r in JOB_SPEC["DebugRuleConfigurations"]]


def start_job(job: str, home: Path, endpoint: str | None, *params: str) -> subprocess.Popen[str]:
    env = {**os.environ, "SDLOCAL_HOME": str(home)}
    env.pop("AWS_ENDPOINT_URL_S3", None)
    endpoint_args = ["--s3-endpoint-url", endpoint] if endpoint else []
    if endpoint is None:  # the embedded S3 (no AWS credentials anywhere, as on a fresh machine)
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
            env.pop(name, None)
        env["AWS_SHARED_CREDENTIALS_FILE"] = env["AWS_CONFIG_FILE"] = str(home / "no-aws-files")
    args = [sys.executable, "-m", "sdlocal", "run", "examples/job.yaml", "--job-name", job, "--json", *endpoint_args]
    for p in params:
        args += ["-p", p]
    return subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_until(what: str, check: Any, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def training_at(home: Path, job: str, step: int) -> bool:
    log = home / "jobs" / job / "logs" / "training.log"
    return log.exists() and f"step {step} " in log.read_text(errors="replace")


def training_done(home: Path, job: str) -> bool:
    log = home / "jobs" / job / "logs" / "training.log"
    return log.exists() and "done: " in log.read_text(errors="replace")


def client_for(url: str) -> Any:
    return boto3.client("s3", endpoint_url=url, region_name="us-east-1",
                        aws_access_key_id="testing", aws_secret_access_key="testing")


def objects(client: Any, prefix: str) -> dict[str, int]:
    pages = client.get_paginator("list_objects_v2").paginate(Bucket="sdlocal", Prefix=prefix)
    return {o["Key"][len(prefix):]: o["Size"] for page in pages for o in page.get("Contents", [])}


def statuses_in_s3(client: Any, job: str) -> dict[str, str]:
    out = {}
    for rule in RULES:
        body = client.get_object(Bucket="sdlocal", Key=f"jobs/{job}/rule-output/{rule}/status.json")["Body"].read()
        out[rule] = json.loads(body)["RuleEvaluationStatus"]
    return out


def assert_nothing_lost(home: Path, client: Any, job: str, verdicts: dict[str, str]) -> None:
    local = home / "jobs" / job / "output" / "tensors"
    files = {p.relative_to(local).as_posix(): p.stat().st_size for p in local.rglob("*")
             if p.is_file() and not p.name.endswith(".tmp") and p.name not in ("training_job_end.ts", ".sdlocal-steps.json")}
    assert len(files) > 100  # a trial worth the name: events and index files of many steps
    stored = objects(client, f"jobs/{job}/debug-output/")
    assert stored.pop("training_job_end.ts", None) == 0, "no end marker in S3"
    missing = sorted(set(files) - set(stored))
    assert not missing, f"{len(missing)} of {len(files)} local files not in S3, e.g. {missing[:3]}"
    assert {k: stored[k] for k in files} == files  # same sizes
    assert statuses_in_s3(client, job) == verdicts


def reference_verdicts(home: Path, job: str) -> dict[str, str]:
    """Each rule of the job evaluated on the complete local trial, no S3 involved."""
    out = {}
    for rule in JOB_SPEC["DebugRuleConfigurations"]:
        params = dict(rule["RuleParameters"])
        args = [sys.executable, "-m", "sdlocal", "evaluate", str(home / "jobs" / job / "output" / "tensors"),
                "--rule", params.pop("rule_to_invoke"), "--json"]
        for k, v in params.items():
            args += ["--param", f"{k}={v}"]
        done = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        out[rule["RuleConfigurationName"]] = json.loads(done.stdout)[0]["RuleEvaluationStatus"]
    return out


def finish(proc: subprocess.Popen[str], timeout: float = 400) -> tuple[dict[str, str], str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "Training completed" in err, err
    return Verdicts({s["RuleConfigurationName"]: s["RuleEvaluationStatus"] for s in json.loads(out)},
                    details=out), err


class Verdicts(dict[str, str]):
    """The rules' statuses; shows their StatusDetails when a comparison fails."""

    def __init__(self, statuses: dict[str, str], details: str) -> None:
        super().__init__(statuses)
        self.details = details

    def __repr__(self) -> str:
        return f"{dict(self)!r} (the statuses as printed: {self.details})"


def test_s3_killed_and_started_again_empty_mid_job_loses_nothing(tmp_path: Path) -> None:
    moto = MotoProcess(log=tmp_path / "moto.log")  # memory only: it comes back with no bucket, no object
    moto.start()
    job = f"fault-kill-{uuid.uuid4().hex[:6]}"
    try:
        client = client_for(moto.url)
        client.create_bucket(Bucket="sdlocal")
        # the training stalls 20 s at step 200 (400 steps alone can end in half a second, before
        # the evaluators' first status): S3 goes down while the training still runs
        proc = start_job(job, tmp_path, moto.url, "steps=400", "stall-at-step=200", "stall-seconds=20")
        try:
            # down while the training writes, after the evaluators wrote their first statuses and
            # after index files went up (so the events files of the uploader's first pass are in S3
            # too: under load its first pass can start after step 60, and a kill before it would
            # lose nothing)
            wait_until("step 60", lambda: training_at(tmp_path, job, 60))
            wait_until("a status", lambda: any(k.endswith("status.json")
                                               for k in objects(client, f"jobs/{job}/rule-output/")))
            wait_until("index files in S3", lambda: any(k.startswith("index/")
                                                        for k in objects(client, f"jobs/{job}/debug-output/")))
            assert not training_done(tmp_path, job), "the training ended before the fault"
            moto.kill()
            time.sleep(3)
            moto.start()
        except BaseException:
            proc.kill()
            raise
        verdicts, err = finish(proc)
        assert verdicts == reference_verdicts(tmp_path, job)
        assert "does not answer" in err and "answers again" in err  # the outage was said, once each
        # and what it lost went up again: found by a tick's check of the first object, or, when the
        # restart fell inside the final upload (after its check), by the final listing of S3
        assert "S3 lost the job's objects" in err or "file(s) were not in" in err, err
        assert_nothing_lost(tmp_path, client, job, verdicts)
    finally:
        moto.kill()


def test_s3_frozen_for_more_than_a_minute_changes_nothing(tmp_path: Path) -> None:
    moto = MotoProcess(log=tmp_path / "moto.log")
    moto.start()
    job = f"fault-freeze-{uuid.uuid4().hex[:6]}"
    try:
        client = client_for(moto.url)
        client.create_bucket(Bucket="sdlocal")
        # lr=1e5: the training explodes, so a verdict that a lost or partial trial would change
        # (ExplodingTensor finds the NaNs) must still come out; default retry window (120 s)
        proc = start_job(job, tmp_path, moto.url, "steps=400", "lr=1e5")
        try:
            wait_until("step 60", lambda: training_at(tmp_path, job, 60))
            moto.freeze()  # connections are accepted and never answered
            frozen_at = time.monotonic()
            time.sleep(65)
            assert proc.poll() is None, "the job ended while S3 was frozen"
            moto.thaw()
        except BaseException:
            proc.kill()
            raise
        verdicts, err = finish(proc)
        assert time.monotonic() - frozen_at > 65
        assert verdicts["ExplodingTensor"] == "IssuesFound"
        assert verdicts == reference_verdicts(tmp_path, job)
        assert "does not answer" in err and "answers again" in err
        assert "S3 lost" not in err  # a frozen S3 keeps its data: nothing to upload again
        assert_nothing_lost(tmp_path, client, job, verdicts)
    finally:
        moto.kill()


def test_embedded_s3_crashing_mid_job_comes_back_with_its_data(tmp_path: Path) -> None:
    from sdlocal.launcher.s3.embedded import EmbeddedS3

    server = EmbeddedS3(tmp_path)
    job = f"fault-embedded-{uuid.uuid4().hex[:6]}"
    proc = start_job(job, tmp_path, None, "steps=400")
    try:
        try:
            wait_until("step 60", lambda: training_at(tmp_path, job, 60))
            state = server.read_state()
            assert state is not None
            client = client_for(state.url)
            wait_until("a status", lambda: any(k.endswith("status.json")
                                               for k in objects(client, f"jobs/{job}/rule-output/")))
            os.kill(state.pid, signal.SIGKILL)  # a crash; the job's watchdog starts it again
        except BaseException:
            proc.kill()
            raise
        verdicts, err = finish(proc)
        assert verdicts == reference_verdicts(tmp_path, job)
        assert "had stopped answering: started again" in err
        assert "S3 lost" not in err  # it came back with what it had: nothing uploaded twice
        again = server.read_state()
        assert again is not None and again.url == state.url and again.pid != state.pid
        assert_nothing_lost(tmp_path, client, job, verdicts)
    finally:
        server.stop()
