"""Evaluators that die or hang during a real job: the real training (examples/train.py with the
hook, process runtime) and real evaluators (`python -m sdlocal.evaluator`) against a real moto server.

One job, four rules: an evaluator SIGKILLed while training runs reads Error within 5 s with how it
ended and no routine log chatter; a custom rule looping forever in invoke_at_step is stopped by
the rule timeout, which says so while it waits; a custom rule file calling os._exit at import
reads Error saying so with its exit code; the fourth rule and the training are unaffected and no
process is left."""
from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from sdlocal.launcher.job.run import JobLifecycle, RunOptions
from sdlocal.launcher.jobdir.folder import JobDir
from sdlocal.launcher.runtime import ProcessHandle, ProcessRuntime
from sdlocal.launcher.s3.endpoint import S3Endpoint
from sdlocal.launcher.spec.parse import spec_from_request
from tests.launcher._procs import gone

pytestmark = pytest.mark.slow
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

LOOP = '''from smdebug.rules.rule import Rule


class Loop(Rule):
    def __init__(self, base_trial):
        super().__init__(base_trial)

    def invoke_at_step(self, step):
        while step >= 2:
            pass
        return False
'''
EXIT_AT_IMPORT = '''import os

print("exit_at_import: giving up before the class exists")
os._exit(3)


class ExitAtImport:
    pass
'''


def status_of(s3_client: Any, bucket: str, rule: str) -> dict[str, Any]:
    try:
        body = s3_client.get_object(Bucket=bucket, Key=f"out/faults/rule-output/{rule}/status.json")["Body"].read()
    except s3_client.exceptions.NoSuchKey:
        return {}
    return dict(json.loads(body))


def test_dead_and_hung_evaluators_during_a_real_job(tmp_path: Path, moto_server: str, s3_client: Any,
                                                    bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    (tmp_path / "loop.py").write_text(LOOP)
    (tmp_path / "exit_at_import.py").write_text(EXIT_AT_IMPORT)
    rules = [("Killed", {"rule_to_invoke": "VanishingGradient"}),
             ("Fine", {"rule_to_invoke": "LossNotDecreasing", "num_steps": "5"}),
             ("Loop", {"rule_to_invoke": "Loop", "source_s3_uri": str(tmp_path / "loop.py")}),
             ("ExitAtImport", {"rule_to_invoke": "ExitAtImport", "source_s3_uri": str(tmp_path / "exit_at_import.py")})]
    request = {
        "TrainingJobName": "faults", "EntryPoint": "train.py", "SourceDir": str(EXAMPLES),
        # stalls 15 s at step 8: the evaluator is killed while training runs, which then completes
        "HyperParameters": {"steps": "16", "samples": "256", "stall-at-step": "8", "stall-seconds": "15"},
        "DebugHookConfig": {"S3OutputPath": f"s3://{bucket}/out", "HookParameters": {"save_interval": "1"},
                            "CollectionConfigurations": [{"CollectionName": "gradients"}, {"CollectionName": "losses"}]},
        "DebugRuleConfigurations": [{"RuleConfigurationName": n, "RuleParameters": p} for n, p in rules],
    }
    spec = spec_from_request(request, base_dir=tmp_path)
    lines: list[str] = []
    lifecycle = JobLifecycle(spec, job_dir=JobDir(tmp_path / "job"), endpoint=S3Endpoint(moto_server, "flag"),
                             runtime=ProcessRuntime(),
                             options=RunOptions(poll_interval_s=0.5, stop_grace_s=5.0, rule_timeout_s=4.0),
                             echo=lines.append, client=s3_client)
    outcome: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: outcome.setdefault("result", lifecycle.run()), daemon=True)
    thread.start()

    # kill the evaluator of "Killed" once it evaluated a step, while the training stalls
    deadline = time.monotonic() + 240
    while status_of(s3_client, bucket, "Killed").get("LastEvaluatedStep") is None:
        assert thread.is_alive() and time.monotonic() < deadline, lines
        time.sleep(0.2)
    (killed,) = [e for e in lifecycle.evaluators.started if e.rule.name == "Killed"]
    assert isinstance(killed.handle, ProcessHandle) and lifecycle.training is not None
    os.kill(killed.handle.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    while status_of(s3_client, bucket, "Killed").get("RuleEvaluationStatus") != "Error":
        assert time.monotonic() - killed_at < 30, lines
        time.sleep(0.05)
    noticed_after = time.monotonic() - killed_at
    training_ran_on = lifecycle.training.poll() is None
    thread.join(300)
    assert not thread.is_alive()
    result = outcome["result"]

    print(f"a SIGKILLed evaluator read Error {noticed_after:.2f} s after the kill")
    assert noticed_after < 5.0
    assert training_ran_on  # noticed while the training ran, and the training went on
    assert result.training_exit_code == 0 and result.training_status == "Completed", lines
    statuses = {s["RuleConfigurationName"]: s for s in result.statuses}
    killed_details = statuses["Killed"]["StatusDetails"]
    assert statuses["Killed"]["RuleEvaluationStatus"] == "Error"
    assert killed_details.startswith("ClientError: the rule evaluator was killed by signal 9 (SIGKILL) without a "
                                     "final status. Last log lines: ")
    assert " INFO " not in killed_details and "InProgress" not in killed_details  # no routine chatter
    assert [line for line in lines if line.startswith("Rule Killed: its evaluator was killed by signal 9 (SIGKILL) "
                                                      "without a status: Error")]

    loop = statuses["Loop"]
    assert loop["RuleEvaluationStatus"] == "Error"
    assert loop["StatusDetails"] == ("ClientError: Rule Loop: step 2 did not return within the rule timeout of 4 s "
                                     "(--rule-timeout): the evaluator was stopped")
    notes = [line for line in lines if re.fullmatch(r"Rule Loop: step 2 has been evaluating for \d+ s \(limit 4 s\)", line)]
    assert notes, lines  # said while it waited

    exited = statuses["ExitAtImport"]
    assert exited["RuleEvaluationStatus"] == "Error"
    assert exited["StatusDetails"] == (
        "ClientError: the rule evaluator exited (code 3) during the import of custom rule file exit_at_import.py, "
        "without a final status. Last log lines: exit_at_import: giving up before the class exists")

    assert statuses["Fine"]["RuleEvaluationStatus"] in ("IssuesFound", "NoIssuesFound"), statuses["Fine"]
    for e in lifecycle.evaluators.started:
        assert isinstance(e.handle, ProcessHandle) and gone(e.handle.pid), e.rule.name
