"""run_job with real processes and a real moto server; the training and evaluator processes are
small stand-ins (the interpreter is replaced), so these tests need neither torch nor the hook."""
from __future__ import annotations

import io
import json
import sys
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from sdlocal.launcher.errors import JobError
from sdlocal.launcher.job.run import RunOptions, run_job
from sdlocal.launcher.jobdir.folder import JobDir
from sdlocal.launcher.runtime import ProcessRuntime
from sdlocal.launcher.s3.endpoint import S3Endpoint
from sdlocal.launcher.spec.model import JobSpec
from sdlocal.launcher.spec.parse import spec_from_request
from tests.helpers import s3_keys
from tests.launcher._procs import gone

STAND_IN = r'''
import json, os, sys, time
import boto3
pids = os.environ["PIDS_DIR"]
if sys.argv[2] == "sdlocal.hook.run":
    open(os.path.join(pids, "training"), "w").write(str(os.getpid()))
    import numpy as np
    from sdlocal.trial.writer import TrialWriter
    cfg = json.load(open(os.environ["SMDEBUG_CONFIG_FILE_PATH"]))
    writer = TrialWriter(cfg["LocalPath"])
    writer.write_collections([])
    for step in range(3):
        writer.write_step(step, "TRAIN", step, [("loss", np.float32(step))])
    behaviour = os.environ.get("FAKE_TRAINING", "ok")
    if behaviour == "hang":
        time.sleep(120)
    sys.exit(3 if behaviour == "fail" else 0)
name = os.environ["SDLOCAL_RULE_CONFIGURATION_NAME"]
open(os.path.join(pids, "rule-" + name), "w").write(str(os.getpid()))
if os.environ.get("ENVS_DIR"):
    json.dump({k: v for k, v in os.environ.items() if k.startswith("SDLOCAL_")},
              open(os.path.join(os.environ["ENVS_DIR"], name + ".json"), "w"))
behaviour = os.environ.get("FAKE_EVALUATOR_" + name, os.environ.get("FAKE_EVALUATOR", "ok"))
print("evaluating", name, flush=True)
if behaviour == "crash":
    print("Traceback: boom, the evaluator broke", flush=True)
    sys.exit(1)
if behaviour == "hang":
    time.sleep(120)
out = os.environ["SDLOCAL_RULE_OUTPUT"][5:]
bucket, _, prefix = out.partition("/")
boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL_S3"]).put_object(
    Bucket=bucket, Key=prefix + "/status.json",
    Body=json.dumps({"RuleConfigurationName": name, "RuleEvaluationStatus": "NoIssuesFound", "StatusDetails": ""}))
'''


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The stand-in interpreter (ProcessRuntime reads the environment when it is created)."""
    (tmp_path / "standin.py").write_text(STAND_IN)
    script = tmp_path / "python"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} {tmp_path / 'standin.py'} \"$@\"\n")
    script.chmod(0o755)
    (tmp_path / "pids").mkdir()
    monkeypatch.setenv("PIDS_DIR", str(tmp_path / "pids"))
    return str(script)


def make_spec(tmp_path: Path, bucket: str, rules: tuple[str, ...] = ("R1", "R2"), name: str = "job-1",
              profiler: dict[str, Any] | None = None) -> JobSpec:
    (tmp_path / "train.py").write_text("")
    req = {"TrainingJobName": name, "EntryPoint": "train.py",
           "DebugHookConfig": {"S3OutputPath": f"s3://{bucket}/out"},
           "DebugRuleConfigurations": [{"RuleConfigurationName": r,
                                        "RuleParameters": {"rule_to_invoke": "VanishingGradient"}} for r in rules],
           "ProfilerRuleConfigurations": [{"RuleConfigurationName": "ProfilerReport"}]}
    if profiler is not None:
        req["ProfilerConfig"] = profiler
    return spec_from_request(req, base_dir=tmp_path, check_rule_names=False)


def run(spec: JobSpec, tmp_path: Path, runtime: str, moto_server: str, s3_client: Any,
        stop: threading.Event | None = None, parts: dict[str, Any] | None = None,
        **options: Any) -> tuple[Any, list[str]]:
    lines: list[str] = []
    opts = RunOptions(poll_interval_s=0.2, upload_interval_s=0.1, stop_grace_s=2.0, **options)
    result = run_job(spec, job_dir=JobDir(tmp_path / "jobs" / spec.job_name), endpoint=S3Endpoint(moto_server, "flag"),
                     runtime=ProcessRuntime(python=runtime), options=opts, echo=lines.append, stop=stop, client=s3_client,
                     **(parts or {}))
    return result, lines


def keys(s3_client: Any, bucket: str) -> list[str]:
    return s3_keys(s3_client, bucket)


def statuses(result: Any) -> dict[str, tuple[str, str]]:
    return {s["RuleConfigurationName"]: (s["RuleEvaluationStatus"], s["StatusDetails"]) for s in result.statuses}


def test_job_runs_uploads_and_reports(tmp_path: Path, runtime: str, moto_server: str,
                                      s3_client: Any, bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = make_spec(tmp_path, bucket)
    result, lines = run(spec, tmp_path, runtime, moto_server, s3_client)
    assert result.training_exit_code == 0 and not result.training_failed
    assert statuses(result) == {"R1": ("NoIssuesFound", ""), "R2": ("NoIssuesFound", ""),
                                "ProfilerReport": ("NoIssuesFound", "")}
    assert not [line for line in lines if "not evaluated yet" in line]
    stored = keys(s3_client, bucket)
    assert "out/job-1/debug-output/training_job_end.ts" in stored
    assert "out/job-1/debug-output/index/000000000/000000000002_worker_0.json" in stored
    # the same name again is refused, --overwrite replaces it
    with pytest.raises(JobError, match="already exists"):
        run(spec, tmp_path, runtime, moto_server, s3_client)
    monkeypatch.setenv("FAKE_TRAINING", "fail")
    result, _ = run(spec, tmp_path, runtime, moto_server, s3_client, overwrite=True)
    assert result.training_exit_code == 3 and result.training_failed
    assert "out/job-1/debug-output/training_job_end.ts" in keys(s3_client, bucket)  # also when training failed


def test_evaluator_without_status_becomes_error(tmp_path: Path, runtime: str, moto_server: str,
                                                s3_client: Any, bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_EVALUATOR", "crash")
    result, _ = run(make_spec(tmp_path, bucket, ("R1",)), tmp_path, runtime, moto_server, s3_client)
    status, details = statuses(result)["R1"]
    assert status == "Error"
    assert details.startswith("ClientError: the rule evaluator exited (code 1) without a final status")
    assert "boom, the evaluator broke" in details
    assert result.statuses[0]["RuleEvaluationJobArn"].startswith("arn:aws:sagemaker:")


def test_evaluator_past_the_rule_timeout_is_stopped_with_error(
        tmp_path: Path, runtime: str, moto_server: str, s3_client: Any, bucket: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_EVALUATOR", "hang")
    result, _ = run(make_spec(tmp_path, bucket, ("R1",)), tmp_path, runtime, moto_server, s3_client,
                    rule_finish_timeout_s=0.5)
    status, details = statuses(result)["R1"]
    assert status == "Error" and "did not finish within 0.5s" in details
    assert gone(int((tmp_path / "pids" / "rule-R1").read_text()))


def test_stop_stops_everything_and_marks_rules_stopped(
        tmp_path: Path, runtime: str, moto_server: str, s3_client: Any, bucket: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_TRAINING", "hang")
    monkeypatch.setenv("FAKE_EVALUATOR", "hang")
    pids = tmp_path / "pids"
    stop = threading.Event()

    def stop_when_all_started() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(list(pids.iterdir())) < 3:
            time.sleep(0.05)
        stop.set()

    threading.Thread(target=stop_when_all_started, daemon=True).start()
    result, lines = run(make_spec(tmp_path, bucket), tmp_path, runtime, moto_server, s3_client, stop=stop)
    assert result.stopped and result.training_failed
    assert "Stopping the training job ..." in lines
    assert {s[0] for s in statuses(result).values()} == {"Stopped"}
    assert "out/job-1/debug-output/training_job_end.ts" in keys(s3_client, bucket)
    for pid_file in pids.iterdir():
        assert gone(int(pid_file.read_text())), pid_file.name


def test_job_record_for_summary(tmp_path: Path, runtime: str, moto_server: str,
                                s3_client: Any, bucket: str) -> None:
    spec = make_spec(tmp_path, bucket, ("R1",))
    run(spec, tmp_path, runtime, moto_server, s3_client)
    record = json.loads((tmp_path / "jobs" / "job-1" / "job.json").read_text())
    assert record["DebugRules"] == [{"RuleConfigurationName": "R1", "RuleOutput": f"s3://{bucket}/out/job-1/rule-output/R1"}]
    assert record["S3EndpointUrl"] == moto_server


def test_sdk_uploads_are_no_earlier_job_and_overwrite_keeps_them(tmp_path: Path, runtime: str, moto_server: str,
                                                                 s3_client: Any, bucket: str) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("train.py")
        tar.addfile(info, io.BytesIO(b""))
    uploads = ["out/job-1/source/sourcedir.tar.gz", "out/job-1/data/train.csv"]  # the SDK's code; a channel
    s3_client.put_object(Bucket=bucket, Key=uploads[0], Body=buf.getvalue())
    s3_client.put_object(Bucket=bucket, Key=uploads[1], Body=b"1,2\n")
    req = {"TrainingJobName": "job-1", "EntryPoint": "train.py", "SourceDir": f"s3://{bucket}/{uploads[0]}",
           "DebugHookConfig": {"S3OutputPath": f"s3://{bucket}/out"},
           "InputDataConfig": [{"ChannelName": "train", "DataSource": {"S3DataSource": {
               "S3DataType": "S3Prefix", "S3Uri": f"s3://{bucket}/out/job-1/data/"}}}]}
    spec = spec_from_request(req, base_dir=tmp_path, check_rule_names=False)
    result, lines = run(spec, tmp_path, runtime, moto_server, s3_client)
    assert result.training_exit_code == 0 and result.model_artifacts == f"s3://{bucket}/out/job-1/output/model.tar.gz"
    assert (tmp_path / "jobs" / "job-1" / "input" / "data" / "train" / "train.csv").read_bytes() == b"1,2\n"
    s3_client.put_object(Bucket=bucket, Key="out/job-1/debug-output/stale", Body=b"")
    with pytest.raises(JobError, match="already exists"):
        run(spec, tmp_path, runtime, moto_server, s3_client)
    run(spec, tmp_path, runtime, moto_server, s3_client, overwrite=True)
    stored = keys(s3_client, bucket)
    assert set(uploads) <= set(stored) and "out/job-1/debug-output/stale" not in stored
    assert "out/job-1/output/model.tar.gz" in stored


def test_overwrite_never_deletes_a_folder_sdlocal_did_not_make(tmp_path: Path, runtime: str, moto_server: str,
                                                               s3_client: Any, bucket: str) -> None:
    spec = make_spec(tmp_path, bucket, ("R1",))
    precious = tmp_path / "jobs" / spec.job_name / "thesis.tex"  # --work-dir pointed at a user's folder
    precious.parent.mkdir(parents=True)
    precious.write_text("years of work")
    with pytest.raises(JobError, match="not a job folder made by sdlocal"):
        run(spec, tmp_path, runtime, moto_server, s3_client, overwrite=True)
    assert precious.read_text() == "years of work"
    assert keys(s3_client, bucket) == []  # nothing started, nothing deleted
    precious.unlink()  # an empty folder may be used; a job folder sdlocal made may be replaced
    run(spec, tmp_path, runtime, moto_server, s3_client, overwrite=True)
    result, _ = run(spec, tmp_path, runtime, moto_server, s3_client, overwrite=True)
    assert result.training_exit_code == 0 and (tmp_path / "jobs" / spec.job_name / ".sdlocal-job").is_file()


def envs_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    envs = tmp_path / "envs"
    envs.mkdir()
    monkeypatch.setenv("ENVS_DIR", str(envs))
    return envs


RUN_PROFILER_RULES: dict[str, Any] = {}  # the evaluator's registry resolves ProfilerReport: the default starts it


def test_profiler_rules_get_one_evaluator_each_listed_after_debugger_rules(
        tmp_path: Path, runtime: str, moto_server: str, s3_client: Any, bucket: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    envs = envs_dir(tmp_path, monkeypatch)
    spec = make_spec(tmp_path, bucket, ("R1",), profiler={"S3OutputPath": f"s3://{bucket}/prof"})
    result, lines = run(spec, tmp_path, runtime, moto_server, s3_client, parts=RUN_PROFILER_RULES)
    assert [(s["RuleConfigurationName"], s["RuleEvaluationStatus"]) for s in result.statuses] == [
        ("R1", "NoIssuesFound"), ("ProfilerReport", "NoIssuesFound")]
    assert not [line for line in lines if "not evaluated yet" in line]
    assert "Training job job-1 started (2 rule evaluator(s)); " in " ".join(lines)
    env = json.loads((envs / "ProfilerReport.json").read_text())
    assert env["SDLOCAL_PROFILER_OUTPUT"] == f"s3://{bucket}/prof/job-1/profiler-output"
    assert env["SDLOCAL_RULE_OUTPUT"] == f"s3://{bucket}/prof/job-1/rule-output/ProfilerReport"
    assert env["SDLOCAL_DEBUG_OUTPUT"] == f"s3://{bucket}/out/job-1/debug-output"
    assert json.loads(env["SDLOCAL_RULE_PARAMETERS"]) == {"rule_to_invoke": "ProfilerReport"}
    stored = keys(s3_client, bucket)
    assert {"prof/job-1/profiler-output/system/training_job_end.ts",
            "prof/job-1/profiler-output/framework/training_job_end.ts"} <= set(stored)
    # `sdlocal summary` reads the job record: the profiler rule after the Debugger rule
    from click.testing import CliRunner

    from sdlocal.launcher.cli import cli

    record = json.loads((tmp_path / "jobs" / "job-1" / "job.json").read_text())
    assert record["ProfilerRules"][0]["Evaluated"] is True
    out = CliRunner().invoke(cli, ["summary", "job-1", "--work-dir", str(tmp_path / "jobs" / "job-1"), "--json",
                                   "--s3-endpoint-url", moto_server])
    assert out.exit_code == 0, out.output
    assert [r["RuleConfigurationName"] for r in json.loads(out.stdout)] == ["R1", "ProfilerReport"]
    assert out.stderr == "Training job job-1: Completed\n"  # from the job record


def test_a_profiler_rule_the_evaluator_cannot_run_gets_no_evaluator(
        tmp_path: Path, runtime: str, moto_server: str, s3_client: Any, bucket: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    envs = envs_dir(tmp_path, monkeypatch)
    # an evaluator that cannot run it (an older evaluator's registry, a spec read without checking names)
    result, lines = run(make_spec(tmp_path, bucket, ("R1",)), tmp_path, runtime, moto_server, s3_client,
                        parts={"runs_profiler_rule": lambda rule: False})
    assert "Profiler rules are not evaluated yet: ProfilerReport" in lines
    assert sorted(p.name for p in envs.iterdir()) == ["R1.json"]
    assert [s["RuleConfigurationName"] for s in result.statuses] == ["R1"]  # no status to wait for: left out
    record = json.loads((tmp_path / "jobs" / "job-1" / "job.json").read_text())
    assert record["ProfilerRules"][0]["Evaluated"] is False
    # no ProfilerConfig and no profiler evaluator: nothing under profiler-output
    assert not [k for k in keys(s3_client, bucket) if "/profiler-output/" in k]


@pytest.mark.parametrize("behaviour", ["crash", "hang"])
def test_profiler_evaluator_that_dies_or_hangs_ends_error(
        behaviour: str, tmp_path: Path, runtime: str, moto_server: str, s3_client: Any, bucket: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_EVALUATOR_ProfilerReport", behaviour)
    result, _ = run(make_spec(tmp_path, bucket, ("R1",)), tmp_path, runtime, moto_server, s3_client,
                    parts=RUN_PROFILER_RULES, rule_finish_timeout_s=1.0)
    assert statuses(result)["R1"] == ("NoIssuesFound", "")
    status, details = statuses(result)["ProfilerReport"]
    assert status == "Error"
    if behaviour == "crash":
        assert details.startswith("ClientError: the rule evaluator exited (code 1) without a final status")
        assert "boom, the evaluator broke" in details
    else:
        assert "did not finish within 1s after training ended" in details
    assert gone(int((tmp_path / "pids" / "rule-ProfilerReport").read_text()))


def test_stop_stops_profiler_evaluators_too(tmp_path: Path, runtime: str, moto_server: str, s3_client: Any,
                                           bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_TRAINING", "hang")
    monkeypatch.setenv("FAKE_EVALUATOR", "hang")
    pids = tmp_path / "pids"
    stop = threading.Event()

    def stop_when_all_started() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(list(pids.iterdir())) < 3:
            time.sleep(0.05)
        stop.set()

    threading.Thread(target=stop_when_all_started, daemon=True).start()
    result, _ = run(make_spec(tmp_path, bucket, ("R1",)), tmp_path, runtime, moto_server, s3_client, stop=stop,
                    parts=RUN_PROFILER_RULES)
    assert result.stopped
    assert statuses(result) == {"R1": ("Stopped", "Stopped: the training job was stopped"),
                                "ProfilerReport": ("Stopped", "Stopped: the training job was stopped")}
    assert sorted(p.name for p in pids.iterdir()) == ["rule-ProfilerReport", "rule-R1", "training"]
    for pid_file in pids.iterdir():
        assert gone(int(pid_file.read_text())), pid_file.name


def test_an_evaluator_dying_while_training_runs_reads_error_at_once(
        tmp_path: Path, runtime: str, moto_server: str, s3_client: Any, bucket: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_TRAINING", "hang")
    monkeypatch.setenv("FAKE_EVALUATOR_R1", "crash")
    monkeypatch.setenv("FAKE_EVALUATOR_R2", "hang")
    stop = threading.Event()
    seen: dict[str, float] = {}

    def watch_r1() -> None:
        deadline = time.monotonic() + 60
        pid_file = tmp_path / "pids" / "rule-R1"
        while time.monotonic() < deadline and not stop.is_set():
            if "exited" not in seen and pid_file.exists() and gone(int(pid_file.read_text() or 0)):
                seen["exited"] = time.monotonic()
            try:
                body = s3_client.get_object(Bucket=bucket, Key="out/job-1/rule-output/R1/status.json")["Body"].read()
            except s3_client.exceptions.NoSuchKey:
                body = b"{}"
            if json.loads(body).get("RuleEvaluationStatus") == "Error":
                seen["error"] = time.monotonic()
                stop.set()  # the training still hangs: the Error came while it ran
            time.sleep(0.05)
        stop.set()

    threading.Thread(target=watch_r1, daemon=True).start()
    result, lines = run(make_spec(tmp_path, bucket), tmp_path, runtime, moto_server, s3_client, stop=stop)
    assert "error" in seen and "exited" in seen
    assert seen["error"] - seen["exited"] < 5.0  # noticed within the settle interval (1 s) and an S3 round
    assert "Rule R1: its evaluator exited (code 1) without a status: Error (see `sdlocal logs job-1 --rule R1`)" in lines
    assert statuses(result)["R1"][0] == "Error"  # not overwritten by the stop
    assert statuses(result)["R2"] == ("Stopped", "Stopped: the training job was stopped")


def test_training_past_its_maximum_runtime_is_stopped_and_the_rules_finish(
        tmp_path: Path, runtime: str, moto_server: str, s3_client: Any, bucket: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_TRAINING", "hang")
    started = time.monotonic()
    # 5 s: time for the stand-in to start and note its pid on a loaded machine
    result, lines = run(make_spec(tmp_path, bucket, ("R1",)), tmp_path, runtime, moto_server, s3_client,
                        max_runtime_s=5.0)
    assert time.monotonic() - started < 60
    assert result.max_runtime_exceeded and result.training_status == "Stopped" and not result.training_failed
    assert ("Training job job-1: MaxRuntimeExceeded: The job stopped because it exceeded the maximum allowed runtime. "
            "(StoppingCondition.MaxRuntimeInSeconds: 5 s) Stopping it (SIGTERM, SIGKILL after 120 s); "
            "the rules finish their evaluation") in lines
    record = json.loads((tmp_path / "jobs" / "job-1" / "job.json").read_text())
    assert (record["TrainingJobStatus"], record["SecondaryStatus"]) == ("Stopped", "MaxRuntimeExceeded")
    assert "FailureReason" not in record  # the service gives one to Failed jobs only
    assert statuses(result) == {"R1": ("NoIssuesFound", ""), "ProfilerReport": ("NoIssuesFound", "")}
    assert "out/job-1/debug-output/training_job_end.ts" in keys(s3_client, bucket)
    assert gone(int((tmp_path / "pids" / "training").read_text()))


def test_a_training_that_cannot_start_leaves_no_evaluator(tmp_path: Path, runtime: str, moto_server: str,
                                                          s3_client: Any, bucket: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from sdlocal.launcher.errors import RuntimeLaunchError

    monkeypatch.setenv("FAKE_EVALUATOR", "hang")

    class NoTraining(ProcessRuntime):
        def start_training(self, launch: Any) -> Any:
            deadline = time.monotonic() + 30  # the evaluator is up before the training fails
            while not (tmp_path / "pids" / "rule-R1").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            raise RuntimeLaunchError("cannot start training job-1: no such image")

    spec = make_spec(tmp_path, bucket, ("R1",))
    with pytest.raises(RuntimeLaunchError, match="no such image"):
        run_job(spec, job_dir=JobDir(tmp_path / "jobs" / "job-1"), endpoint=S3Endpoint(moto_server, "flag"),
                runtime=NoTraining(python=runtime), options=RunOptions(stop_grace_s=2.0), echo=lambda _: None,
                client=s3_client)
    assert gone(int((tmp_path / "pids" / "rule-R1").read_text()))
    body = s3_client.get_object(Bucket=bucket, Key="out/job-1/rule-output/R1/status.json")["Body"].read()
    assert json.loads(body)["RuleEvaluationStatus"] == "Stopped"
    assert "out/job-1/debug-output/training_job_end.ts" in keys(s3_client, bucket)


def test_s3_failing_a_check_while_training_runs_is_not_fatal(tmp_path: Path, runtime: str, moto_server: str,
                                                              s3_client: Any, bucket: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from botocore.exceptions import EndpointConnectionError

    monkeypatch.setenv("FAKE_TRAINING", "hang")
    failures = [0]

    class Flaky:  # the stop-request reads fail for a while, as an S3 endpoint that went away would
        def __getattr__(self, name: str) -> Any:
            return getattr(s3_client, name)

        def get_object(self, **kwargs: Any) -> Any:
            if kwargs["Key"].endswith("actions/stop-training.json") and failures[0] < 3:
                failures[0] += 1
                raise EndpointConnectionError(endpoint_url=moto_server)
            return s3_client.get_object(**kwargs)

    lines: list[str] = []
    result = run_job(make_spec(tmp_path, bucket, ("R1",)), job_dir=JobDir(tmp_path / "jobs" / "job-1"),
                     endpoint=S3Endpoint(moto_server, "flag"), runtime=ProcessRuntime(python=runtime),
                     options=RunOptions(action_poll_interval_s=0.2, stop_grace_s=2.0, max_runtime_s=3.0),
                     echo=lines.append, client=Flaky())
    assert failures[0] == 3
    # the outage is retried through and said twice in all: when it starts and when S3 answers again
    outage = [line for line in lines if line.startswith(f"Warning: S3 at {moto_server}")]
    # (under load the injected failures can fall in two separate outages: each is said as a pair)
    assert outage and len(outage) % 2 == 0, lines
    assert all("does not answer" in a and "answers again" in b for a, b in zip(outage[::2], outage[1::2], strict=True)), lines
    assert result.max_runtime_exceeded and statuses(result) == {"R1": ("NoIssuesFound", ""),
                                                                "ProfilerReport": ("NoIssuesFound", "")}


def test_an_evaluator_dying_while_the_rules_finish_reads_error_before_the_timeout(
        tmp_path: Path, runtime: str, moto_server: str, s3_client: Any, bucket: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_EVALUATOR_R1", "crash")
    monkeypatch.setenv("FAKE_EVALUATOR_R2", "hang")  # keeps the final wait going until the timeout
    said: list[tuple[float, str]] = []
    started = time.monotonic()
    result = run_job(make_spec(tmp_path, bucket), job_dir=JobDir(tmp_path / "jobs" / "job-1"),
                     endpoint=S3Endpoint(moto_server, "flag"), runtime=ProcessRuntime(python=runtime),
                     options=RunOptions(stop_grace_s=2.0, rule_finish_timeout_s=8.0),
                     echo=lambda line: said.append((time.monotonic() - started, line)), client=s3_client)
    ended = time.monotonic() - started
    (noticed,) = [t for t, line in said if line.startswith("Rule R1: its evaluator exited (code 1)")]
    assert ended - noticed > 4.0  # said long before the other rule's timeout ended the job
    assert statuses(result)["R1"][0] == "Error"
    assert statuses(result)["R2"][0] == "Error" and "did not finish within 8s" in statuses(result)["R2"][1]
