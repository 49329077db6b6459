"""Where a job's data goes when the user has AWS credentials (every SageMaker user does): the
embedded S3, said so, unless Amazon S3 is asked for by name (`--s3 aws`). Before, credentials
anywhere sent `sdlocal run examples/job.yaml` to Amazon S3 and its bucket `sdlocal`."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import boto3
import pytest

REPO = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.slow


def test_aws_credentials_alone_keep_the_job_on_the_embedded_s3(tmp_path: Path) -> None:
    home, user_home = tmp_path / "sdlocal-home", tmp_path / "user"
    (user_home / ".aws").mkdir(parents=True)
    (user_home / ".aws" / "config").write_text("[default]\nregion = eu-west-1\n")
    (user_home / ".aws" / "credentials").write_text("[default]\naws_access_key_id = AKIAEXAMPLE\n"
                                                    "aws_secret_access_key = not-a-secret\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SDLOCAL_"))}
    env.update({"HOME": str(user_home), "SDLOCAL_HOME": str(home), "SDLOCAL_RUNTIME": "process",
                "AWS_PROFILE": "default", "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": "x"})
    job = f"creds-{uuid.uuid4().hex[:6]}"
    try:
        proc = subprocess.run([sys.executable, "-m", "sdlocal", "run", "examples/job.yaml", "--job-name", job,
                               "-p", "steps=20", "--json"], cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=600)
        assert proc.returncode == 0, proc.stderr
        state = json.loads((home / "s3.json").read_text())  # the embedded S3 this run started
        assert (f"S3: the embedded server at {state['url']} (stop it with `sdlocal s3 stop`); your AWS credentials "
                "are not used (`--s3 aws` sends the job's data to Amazon S3)") in proc.stderr.splitlines()
        s3 = boto3.client("s3", endpoint_url=state["url"], region_name="us-east-1",
                          aws_access_key_id="sdlocal", aws_secret_access_key="sdlocal")
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket="sdlocal", Prefix=f"jobs/{job}/").get("Contents", [])]
        assert f"jobs/{job}/debug-output/training_job_end.ts" in keys
        assert any(k.startswith(f"jobs/{job}/rule-output/LossNotDecreasing/") for k in keys)
        assert {s["RuleEvaluationStatus"] for s in json.loads(proc.stdout)} == {"NoIssuesFound"}
        # summary finds the job where it ran, with the same credentials around
        summary = subprocess.run([sys.executable, "-m", "sdlocal", "summary", job, "--json"], cwd=REPO, env=env,
                                 capture_output=True, text=True, timeout=120)
        assert summary.returncode == 0, summary.stderr
        assert len(json.loads(summary.stdout)) == 3
    finally:
        subprocess.run([sys.executable, "-m", "sdlocal", "s3", "stop", "--discard-data"], env=env,
                       capture_output=True, timeout=60)
