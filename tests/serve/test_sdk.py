"""The done-when test of issue 12: an unchanged SageMaker Python SDK v2 script (the real SDK, in its
side virtualenv) against `sdlocal serve`, given only the exports it printed."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from tests.conftest import REPO_ROOT

SCRIPT = Path(__file__).parent / "scripts" / "sdk_job.py"
API_FIELDS = {"RuleConfigurationName", "RuleEvaluationJobArn", "RuleEvaluationStatus", "StatusDetails",
              "LastModifiedTime"}


def test_unchanged_sdk_script_runs_against_serve(served, sagemaker_python: Path, tmp_path: Path) -> None:
    home, exports = served
    assert set(exports) == {"AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                            "AWS_DEFAULT_REGION", "SAGEMAKER_USER_CONFIG_OVERRIDE"}
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), **exports}  # nothing else of ours
    proc = subprocess.run([str(sagemaker_python), str(SCRIPT), str(REPO_ROOT / "examples"),
                           str(REPO_ROOT / "custom_rules" / "custom_gradient_rule.py")],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=400)
    out = proc.stdout + proc.stderr
    (tmp_path / "sdk-output.txt").write_text(out)
    assert proc.returncode == 0, out[-5000:]
    seen = json.loads(out.split("SDK-RESULT ", 1)[1].splitlines()[0])

    # fit() showed the training log (CloudWatch Logs), the secondary statuses and the rule statuses
    assert "step" in out and "loss" in out, out[-3000:]
    assert "Training - Training image download completed. Training in progress." in out
    # (the SDK prints the rules' statuses at its DescribeTrainingJob calls, every 30 s)
    assert re.search(r"^ExplodingTensor: (InProgress|IssuesFound)$", out, re.M), out[-3000:]
    assert re.search(r"^CustomGradientRule: (InProgress|NoIssuesFound)$", out, re.M), out[-3000:]
    # a rule's StopTraining ended the job Stopped; the rules finished and read as the API gives them
    assert seen["fired_status"] == "Stopped"
    statuses = {r["RuleConfigurationName"]: r for r in seen["summary"]}
    assert list(statuses) == ["ExplodingTensor", "VanishingGradient", "CustomGradientRule"]
    assert statuses["ExplodingTensor"]["RuleEvaluationStatus"] == "IssuesFound"
    assert all(set(r) <= API_FIELDS and set(r) >= API_FIELDS - {"StatusDetails"} for r in seen["summary"])
    assert seen["summary_types"] == ["datetime"]
    assert all(r["RuleEvaluationJobArn"].startswith("arn:aws:sagemaker:us-east-1:") for r in seen["summary"])
    # stop() and attach()
    assert seen["attached_stopped_job"]["status"] == "Stopped"
    assert seen["attached_stopped_job"]["transitions"][-2:] == ["Stopping", "Stopped"]
    assert seen["attached_fired_job"] == {"status": "Stopped", "framework_version": "2.1", "entry_point": "train.py",
                                          "transitions": ["Starting", "Downloading", "Training", "Stopping",
                                                          "Uploading", "Stopped"]}
    # the trial at latest_job_debugger_artifacts_path(), read with sdlocal's smdebug
    path = seen["artifacts_path"]
    assert path.endswith(f"/{seen['fired_job']}/debug-output")
    os.environ["AWS_ENDPOINT_URL_S3"] = exports["AWS_ENDPOINT_URL"]
    try:
        from smdebug.trials import create_trial

        trial = create_trial(path)
        assert trial.loaded_all_steps
        assert len(trial.steps()) >= 2
        assert any("loss" in name.lower() for name in trial.tensor_names())
    finally:
        del os.environ["AWS_ENDPOINT_URL_S3"]
