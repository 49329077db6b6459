"""StopTraining: the watcher (real moto S3, a fake clock) and run_job end to end with the process
runtime: a stand-in training that would run for a minute, the REAL evaluator with a local custom
rule (uploaded by the launcher) whose action_json asks to stop the job when it fires."""
from __future__ import annotations

import json
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from sdlocal.evaluator.actions import STOP_TRAINING_KEY, StopTrainingRequest
from sdlocal.launcher.job.run import JobResult, RunOptions, run_job
from sdlocal.launcher.job.stop_training import StopTrainingWatcher
from sdlocal.launcher.jobdir.folder import JobDir
from sdlocal.launcher.runtime import ProcessRuntime, RuleLaunch
from sdlocal.launcher.runtime.process import ProcessHandle
from sdlocal.launcher.s3.endpoint import S3Endpoint
from sdlocal.launcher.spec.model import JobSpec
from sdlocal.launcher.spec.parse import spec_from_request
from sdlocal.trial.storage import S3Storage
from tests.launcher._procs import gone


def put_request(s3_client: Any, bucket: str, rule: str, prefix: str, step: int = 4) -> None:
    body = StopTrainingRequest(rule, "some-job", prefix, step, "2026-01-01T00:00:00Z").to_json()
    s3_client.put_object(Bucket=bucket, Key=f"out/rule-output/{rule}/{STOP_TRAINING_KEY}", Body=body.encode())


def test_watcher_matches_the_prefix_once_per_interval(s3_client: Any, bucket: str) -> None:
    now = [0.0]
    ignored: list[StopTrainingRequest] = []
    outputs = {r: S3Storage(bucket, f"out/rule-output/{r}", client=s3_client) for r in ("A", "B")}
    watcher = StopTrainingWatcher("train-job-7", outputs, interval=1.0, clock=lambda: now[0],
                                 on_ignored=ignored.append)
    assert watcher.poll() is None  # nothing yet
    put_request(s3_client, bucket, "A", "other-")
    put_request(s3_client, bucket, "B", "train-job")
    assert watcher.poll() is None  # within the interval: no listing at all
    now[0] = 1.0
    request = watcher.poll()
    assert request is not None and request.rule_configuration_name == "B" and request.step == 4
    assert [r.training_job_prefix for r in ignored] == ["other-"]
    now[0] = 2.0
    assert watcher.poll() is None and len(ignored) == 1  # each request is seen once
    # "contains" is not enough: the name must start with the prefix
    assert not StopTrainingRequest("R", "j", "job-7", None, "").matches("train-job-7")


TRAINER = r'''
import json, os, sys, time
import numpy as np
from sdlocal.trial.writer import TrialWriter
open(os.path.join(os.environ["PIDS_DIR"], "training"), "w").write(str(os.getpid()))
cfg = json.load(open(os.environ["SMDEBUG_CONFIG_FILE_PATH"]))
writer = TrialWriter(cfg["LocalPath"])
writer.write_collections([])
steps_file = os.path.join(os.environ["PIDS_DIR"], "steps")
steps = int(open(steps_file).read()) if os.path.exists(steps_file) else 600
release = os.path.join(os.environ["PIDS_DIR"], "release")  # the test lets training end early
for step in range(steps):
    writer.write_step(step, "TRAIN", step, [("loss", np.float32(1.0 / (step + 1)))])
    last = os.path.join(os.environ["PIDS_DIR"], "last-step")
    open(last + ".tmp", "w").write(str(step))
    os.replace(last + ".tmp", last)  # whole: the stop may come between any two instructions
    if os.path.exists(release):
        break
    time.sleep(0.1)
'''

FIRING_RULE = '''from smdebug.rules.rule import Rule


class FiresAtStep(Rule):
    def __init__(self, base_trial, fire_step="3", action_str=""):
        super().__init__(base_trial, action_str=action_str)
        self.fire_step = int(fire_step)

    def set_required_tensors(self, step):
        self.req_tensors.add("loss", steps=[step])

    def invoke_at_step(self, step):
        (loss,) = self.req_tensors.get()
        return step >= self.fire_step and float(loss.value(step)) > 0
'''


class RecordingRuntime(ProcessRuntime):
    def __init__(self, python: str) -> None:
        super().__init__(python=python)
        self.rule_launches: list[RuleLaunch] = []

    def start_rule(self, launch: RuleLaunch) -> ProcessHandle:
        self.rule_launches.append(launch)
        return super().start_rule(launch)


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RecordingRuntime:
    """Training is the stand-in above; evaluators are the real `python -m sdlocal.evaluator`."""
    (tmp_path / "trainer.py").write_text(TRAINER)
    script = tmp_path / "python"
    script.write_text(f'#!/bin/sh\nif [ "$2" = sdlocal.hook.run ]; then exec {sys.executable} {tmp_path / "trainer.py"}; fi\n'
                      f'exec {sys.executable} "$@"\n')
    script.chmod(0o755)
    (tmp_path / "pids").mkdir()
    monkeypatch.setenv("PIDS_DIR", str(tmp_path / "pids"))
    return RecordingRuntime(str(script))


def stop_spec(tmp_path: Path, bucket: str, name: str, prefix: str) -> JobSpec:
    (tmp_path / "train.py").write_text("")
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "firing.py").write_text(FIRING_RULE)
    action = json.dumps([{"name": "StopTraining", "training_job_prefix": prefix}])
    req = {"TrainingJobName": name, "EntryPoint": "train.py", "DebugHookConfig": {"S3OutputPath": f"s3://{bucket}/out"},
           "DebugRuleConfigurations": [
               {"RuleConfigurationName": "Fires", "RuleParameters": {
                   "rule_to_invoke": "FiresAtStep", "source_s3_uri": "rules/firing.py", "action_json": action}}]}
    return spec_from_request(req, base_dir=tmp_path)


def run(spec: JobSpec, tmp_path: Path, runtime: RecordingRuntime, moto_server: str, s3_client: Any,
        lines: list[str] | None = None) -> tuple[JobResult, list[str]]:
    lines = [] if lines is None else lines
    opts = RunOptions(poll_interval_s=0.2, upload_interval_s=0.1, stop_grace_s=5.0, action_poll_interval_s=0.2,
                      rule_finish_timeout_s=120, collections_timeout_s=30)
    result = run_job(spec, job_dir=JobDir(tmp_path / "jobs" / spec.job_name), endpoint=S3Endpoint(moto_server, "flag"),
                     runtime=runtime, options=opts, echo=lines.append, client=s3_client)
    return result, lines


@pytest.mark.slow
def test_stop_training_action_stops_the_job_and_the_rule_finishes(
        tmp_path: Path, runtime: RecordingRuntime, moto_server: str, s3_client: Any, bucket: str) -> None:
    started = time.monotonic()
    result, lines = run(stop_spec(tmp_path, bucket, "stopme-1", "stopme"), tmp_path, runtime, moto_server, s3_client)
    assert time.monotonic() - started < 50  # the training alone would take 60 s
    assert result.stopped_by_rule is not None and result.stopped_by_rule.rule_configuration_name == "Fires"
    assert result.training_status == "Stopped" and not result.stopped and not result.training_failed
    assert any(line.startswith("Rule Fires fired at step 3: StopTraining action") for line in lines), lines
    last_step = int((tmp_path / "pids" / "last-step").read_text())
    assert 3 <= last_step < 300
    assert gone(int((tmp_path / "pids" / "training").read_text()))
    (status,) = result.statuses
    assert status["RuleEvaluationStatus"] == "IssuesFound", status
    assert "rule FiresAtStep at step 3 resulted" in status["StatusDetails"]
    assert status["LastEvaluatedStep"] >= last_step - 1  # it finished evaluating what was saved
    stored = {o["Key"] for o in s3_client.list_objects_v2(Bucket=bucket, Prefix="out/stopme-1/")["Contents"]}
    assert "out/stopme-1/debug-output/training_job_end.ts" in stored
    assert "out/stopme-1/rule-code/Fires/firing.py" in stored  # the local rule file, uploaded
    (launch,) = runtime.rule_launches  # the evaluator was given the uploaded file, not the host path
    assert dict(launch.rule_parameters)["source_s3_uri"] == f"s3://{bucket}/out/stopme-1/rule-code/Fires/firing.py"


@pytest.mark.slow
def test_stop_request_for_another_prefix_does_not_stop(
        tmp_path: Path, runtime: RecordingRuntime, moto_server: str, s3_client: Any, bucket: str) -> None:
    # Training runs (up to a minute) until the launcher has said it ignored the request: the
    # rule's request must be seen while training runs, however slowly the evaluator starts.
    ignored = "Rule Fires requested StopTraining for jobs starting with 'keepme-2': not keepme-1, ignored"
    lines: list[str] = []

    def said_fired() -> bool:  # the rule's status change, said while training runs (as fit() shows it)
        return any(line.startswith("Rule Fires: IssuesFound (RuleEvaluationConditionMet") for line in lines)

    def release_when_ignored() -> None:
        deadline = time.monotonic() + 50
        while not (ignored in lines and said_fired()) and time.monotonic() < deadline:
            time.sleep(0.1)
        (tmp_path / "pids" / "release").write_text("")

    releaser = threading.Thread(target=release_when_ignored, daemon=True)
    releaser.start()
    result, lines = run(stop_spec(tmp_path, bucket, "keepme-1", "keepme-2"), tmp_path, runtime, moto_server,
                        s3_client, lines)
    releaser.join(5)
    assert ignored in lines, lines
    assert result.stopped_by_rule is None and result.training_status == "Completed"
    assert int((tmp_path / "pids" / "last-step").read_text()) < 590  # released, not run to the end
    fired = next(i for i, line in enumerate(lines) if line.startswith("Rule Fires: IssuesFound"))
    assert fired < lines.index("Training completed"), lines
    assert sum(line.startswith("Rule Fires: ") for line in lines) == 1  # said once
    (status,) = result.statuses
    assert status["RuleEvaluationStatus"] == "IssuesFound"


@pytest.mark.slow
def test_stalled_training_rule_stops_a_hung_training(tmp_path: Path, moto_server: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """`sdlocal run` end to end: the example training hangs before step 6; StalledTrainingRule with
    stop_training_on_fire=True fires after `threshold` idle seconds, and the launcher stops the job."""
    from click.testing import CliRunner

    from sdlocal.launcher.cli import cli

    monkeypatch.setenv("SDLOCAL_HOME", str(tmp_path / "home"))
    examples = Path(__file__).resolve().parents[3] / "examples"
    started = time.monotonic()
    result = CliRunner().invoke(cli, [
        "run", "--entry-point", "train.py", "--source-dir", str(examples), "--job-name", "stalls-1",
        "-p", "steps=50", "-p", "stall-at-step=6", "-p", "stall-seconds=300", "--hook-param", "save_interval=1",
        "--rule", "StalledTrainingRule", "--rule-param", "threshold=10", "--rule-param", "stop_training_on_fire=True",
        "--s3-endpoint-url", moto_server, "--poll-interval", "0.5", "--json"])
    assert time.monotonic() - started < 120, result.output  # the hang alone is 300 s
    assert result.exit_code == 0, result.output  # stopped by a rule: Stopped, not failed (as the SDK's wait)
    assert "Training job stalls-1: Stopped" in result.output
    rows = json.loads(result.output[result.output.index("["):])
    (status,) = rows
    assert status["RuleEvaluationStatus"] == "IssuesFound", status
    # it fired during the hang (at the last step it had evaluated), not while training started up
    fired_at = int(re.search(r"StalledTrainingRule at step (\d+) resulted", status["StatusDetails"]).group(1))  # type: ignore[union-attr]
    assert 4 <= fired_at <= 5, status
    log = (tmp_path / "home" / "jobs" / "stalls-1" / "logs" / "training.log").read_text()
    assert "stalling for 300 s before step 6" in log and "done:" not in log
