"""The CLI in-process (CliRunner): help everywhere, errors in one line, usage errors, summary,
evaluate, rules, s3 status/stop."""
from __future__ import annotations

import json
import socket
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from sdlocal.launcher.cli import cli
from sdlocal.launcher.errors import SpecError
from sdlocal.launcher.spec.overrides import group_rule_flags, rule_options_in_order


def all_commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = [prefix]
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            out += all_commands(cmd, (*prefix, name))
        else:
            out.append((*prefix, name))
    return out


def test_every_command_has_help() -> None:
    commands = all_commands(cli)
    assert {("run",), ("summary",), ("evaluate",), ("rules",), ("s3", "stop"), ("s3", "status")} <= set(commands)
    for path in commands:
        result = CliRunner().invoke(cli, [*path, "--help"])
        assert result.exit_code == 0, (path, result.output)
        assert "Usage:" in result.output
        cmd: Any = cli
        for name in path:
            cmd = cmd.commands[name]
        assert cmd.help, f"{path} has no help text"


def test_rule_params_attach_to_the_preceding_rule() -> None:
    args = ["--rule", "A", "--rule-param", "x=1", "--job-name", "j", "--custom-rule=f.py:B",
            "--rule-param=y=2", "--rule-param", "z=3", "--rule", "C", "--", "--rule", "D"]
    flags = group_rule_flags(rule_options_in_order(args))
    assert [(f.name, f.params) for f in flags] == [("A", (("x", "1"),)), ("B", (("y", "2"), ("z", "3"))), ("C", ())]
    assert flags[1].source is not None and flags[1].source.name == "f.py"


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["run", "--rule-param", "x=1", "--rule", "A"])
    assert result.exit_code == 2 and "--rule-param must follow" in result.output
    result = runner.invoke(cli, ["run", "--hyperparameter", "novalue"])
    assert result.exit_code == 2 and "KEY=VALUE" in result.output
    result = runner.invoke(cli, ["evaluate", str(tmp_path)])
    assert result.exit_code == 2 and "--rule" in result.output


def test_errors_are_one_line_and_debug_shows_traceback(tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("EntryPoint: missing.py\n")
    result = CliRunner().invoke(cli, ["run", str(spec)])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        f"Error: EntryPoint: 'missing.py' not found in the source directory {tmp_path.resolve()}"]
    result = CliRunner().invoke(cli, ["--debug", "run", str(spec)])
    assert isinstance(result.exception, SpecError)
    bad = tmp_path / "bad.yaml"
    bad.write_text("EntryPoint: [x\n")
    result = CliRunner().invoke(cli, ["run", str(bad)])
    assert result.exit_code == 1 and result.output.startswith(f"Error: {bad}: malformed YAML")


def test_summary_reads_statuses_from_s3(moto_server: str, s3_client: Any, bucket: str) -> None:
    status = {"RuleConfigurationName": "VanishingGradient", "RuleEvaluationStatus": "IssuesFound",
              "StatusDetails": "RuleEvaluationConditionMet: at step 5", "LastModifiedTime": "2026-01-01T00:00:00Z"}
    s3_client.put_object(Bucket=bucket, Key="out/j1/rule-output/VanishingGradient/status.json",
                         Body=json.dumps(status))
    s3_client.put_object(Bucket=bucket, Key="out/j1/rule-output/AllZero/status.json",
                         Body=json.dumps({**status, "RuleConfigurationName": "AllZero",
                                          "RuleEvaluationStatus": "NoIssuesFound", "StatusDetails": ""}))
    args = ["summary", "j1", "--s3-output-path", f"s3://{bucket}/out/", "--s3-endpoint-url", moto_server]
    result = CliRunner().invoke(cli, [*args, "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [r["RuleConfigurationName"] for r in rows] == ["AllZero", "VanishingGradient"]
    table = CliRunner().invoke(cli, args).output.splitlines()
    assert table[0].split() == ["RuleConfigurationName", "RuleEvaluationStatus", "StatusDetails"]
    assert table[2].split()[:3] == ["VanishingGradient", "IssuesFound", "RuleEvaluationConditionMet:"]


def test_summary_uses_the_local_job_record(tmp_path: Path, moto_server: str, s3_client: Any, bucket: str) -> None:
    (tmp_path / "job.json").write_text(json.dumps({
        "DebugRules": [{"RuleConfigurationName": "R1", "RuleOutput": f"s3://{bucket}/x/j/rule-output/R1"}],
        "ProfilerRules": [{"RuleConfigurationName": "ProfilerReport", "RuleOutput": f"s3://{bucket}/x/j/rule-output/P"}],
    }))
    result = CliRunner().invoke(cli, ["summary", "j", "--work-dir", str(tmp_path), "--json",
                                      "--s3-endpoint-url", moto_server])
    assert result.exit_code == 0, result.output
    # R1 has not written a status yet: InProgress; the profiler rule (not evaluated) is left out
    assert [(r["RuleConfigurationName"], r["RuleEvaluationStatus"]) for r in json.loads(result.output)] == [
        ("R1", "InProgress")]
    # rule_job_summary()'s shape: DescribeTrainingJob's RuleEvaluationStatus fields, no StatusDetails when empty
    row = json.loads(result.output)[0]
    assert list(row) == ["RuleConfigurationName", "RuleEvaluationJobArn", "RuleEvaluationStatus", "LastModifiedTime"]
    assert row["RuleEvaluationJobArn"].startswith("arn:aws:sagemaker:us-east-1:123456789012:processing-job/j-r1-")
    assert datetime.fromisoformat(row["LastModifiedTime"]).tzinfo is not None


def test_rules_lists_builtins() -> None:
    result = CliRunner().invoke(cli, ["rules"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0].split()[:2] == ["Rule", "Group"]
    assert any(line.startswith("VanishingGradient") for line in result.output.splitlines())
    rows = json.loads(CliRunner().invoke(cli, ["rules", "--json"]).output)
    assert "threshold" in next(r for r in rows if r["name"] == "VanishingGradient")["parameters"]


def test_rules_lists_profiler_rules_grouped_after_debugger_rules() -> None:
    lines = CliRunner().invoke(cli, ["rules"]).output.splitlines()
    blocks = "\n".join(lines[1:]).split("\n\n")  # one block per group, rules.md's order, then the recommended set
    assert [b.split()[1] if b.split()[1] != "deep" else "deep learning" for b in blocks][:2] == ["universal", "deep learning"]
    profiler = blocks[-2].splitlines()
    assert [line.split()[0] for line in profiler] == sorted([
        "BatchSize", "CPUBottleneck", "Dataloader", "GPUMemoryIncrease", "IOBottleneck", "LoadBalancing",
        "LowGPUUtilization", "MaxInitializationTime", "OverallFrameworkMetrics", "OverallSystemUsage",
        "ProfilerReport", "StepOutlier"])
    assert next(line for line in profiler if line.startswith("StepOutlier")).split(None, 2)[2] == (
        "stddev=3, mode=None, n_outliers=10, scan_interval_us=60000000")
    rows = {r["name"]: r for r in json.loads(CliRunner().invoke(cli, ["rules", "--json"]).output)}
    assert rows["StepOutlier"]["kind"] == "profiler" and rows["StepOutlier"]["default_collections"] == []
    assert rows["VanishingGradient"]["kind"] == "debugger"
    assert rows["VanishingGradient"]["default_collections"] == [
        {"CollectionName": "gradients", "CollectionParameters": {"save_interval": "500"}}]


@pytest.mark.parametrize(("trial", "rule", "status", "code"), [
    ("exploding", "ExplodingTensor", "IssuesFound", 0),
    ("healthy", "ExplodingTensor", "NoIssuesFound", 0),
    ("healthy", "NoSuchRule", "Error", 1),
])
def test_evaluate_exit_codes(fixture_trials: Path, trial: str, rule: str, status: str, code: int) -> None:
    result = CliRunner().invoke(cli, ["evaluate", str(fixture_trials / trial), "--rule", rule, "--json"])
    assert result.exit_code == code, result.output
    assert json.loads(result.stdout)[0]["RuleEvaluationStatus"] == status
    if code:  # the culprit, once, as the command's one-line error
        assert result.stderr.strip().splitlines() == [
            "Error: ClientError: Unknown rule 'NoSuchRule'. Run `sdlocal rules` to list the built-in rules."]


def test_s3_status_and_stop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SDLOCAL_HOME", str(tmp_path))
    runner = CliRunner()
    # first line: whether it runs; second: its data on disk (tests/launcher/s3/test_s3.py)
    assert runner.invoke(cli, ["s3", "status"]).output.splitlines()[0] == "not running"
    from sdlocal.launcher.s3.embedded import EmbeddedS3

    state = EmbeddedS3(tmp_path).ensure()
    try:
        assert runner.invoke(cli, ["s3", "status"]).output.splitlines()[0] == f"running at {state.url} (pid {state.pid})"
    finally:
        out = runner.invoke(cli, ["s3", "stop"]).output
    assert f"pid {state.pid}" in out
    assert runner.invoke(cli, ["s3", "stop"]).output.splitlines()[0] == "not running"


def test_run_sdk_request_reports_ignored_fields_once(tmp_path: Path, moto_server: str, s3_client: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SDLOCAL_HOME", str(tmp_path / "home"))
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("")
    job = "pytorch-training-2026-11-22-10-00-00-123"
    s3_client.create_bucket(Bucket="sagemaker-us-east-1-123456789012")
    s3_client.put_object(Bucket="sagemaker-us-east-1-123456789012", Key=f"{job}/debug-output/x", Body=b"")
    spec = Path(__file__).parents[1] / "data" / "sdk_v2_request.json"
    result = CliRunner().invoke(cli, ["run", str(spec), "--source-dir", str(tmp_path / "src"),
                                      "--s3-endpoint-url", moto_server])
    lines = result.output.splitlines()
    ignored = [line for line in lines if line.startswith("Ignored (SageMaker-only) fields: ")]
    assert len(ignored) == 1 and "RoleArn" in ignored[0] and "ResourceConfig" in ignored[0]
    # the job name is taken: refused before anything starts
    assert result.exit_code == 1
    assert lines[-1].startswith(f"Error: Training job {job} already exists")


def test_unreachable_s3_fails_at_first_contact_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An endpoint that never answered (a typo) is refused at once, not after the 120 s of retries
    that are there for outages of an endpoint that answered (SDLOCAL_S3_RETRY_S stays at its default)."""
    monkeypatch.setenv("SDLOCAL_HOME", str(tmp_path))
    monkeypatch.delenv("SDLOCAL_S3_RETRY_S", raising=False)
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "train.py").write_text("")
    for command in (["summary", "some-job"], ["run", "--entry-point", "train.py", "--source-dir", str(tmp_path)],
                    ["evaluate", "s3://sdlocal/jobs/some-job/debug-output", "--rule", "LossNotDecreasing"]):
        started = time.monotonic()
        result = CliRunner().invoke(cli, [*command, "--s3-endpoint-url", f"http://127.0.0.1:{port}"])
        took = time.monotonic() - started
        assert result.exit_code == 1, command
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith(f"Error: S3 endpoint http://127.0.0.1:{port} does not answer (--s3-endpoint-url): "
                               "Could not connect to the endpoint URL"), line
        assert took < 60, f"{command}: {took:.1f} s: the first contact must not ride the outage retries"
    assert not (tmp_path / "jobs").exists() and not (tmp_path / "running").exists()  # nothing was started


def test_summary_of_unknown_job_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moto_server: str,
                                            s3_client: Any) -> None:
    monkeypatch.setenv("SDLOCAL_HOME", str(tmp_path))
    s3_client.create_bucket(Bucket="sdlocal")
    result = CliRunner().invoke(cli, ["summary", "never-ran", "--s3-endpoint-url", moto_server])
    assert result.exit_code == 1
    assert result.stderr.strip() == "Error: no training job 'never-ran' under s3://sdlocal/jobs/ (give its --s3-output-path?)"


def test_logs_and_stop_of_unknown_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SDLOCAL_HOME", str(tmp_path))
    for args in (["logs", "nope"], ["logs", "nope", "--rule", "X"], ["stop", "nope-never-ran"]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 1, args
        assert result.output.startswith("Error: unknown job nope") and len(result.output.splitlines()) == 1


def test_logs_of_a_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SDLOCAL_HOME", str(tmp_path))
    logs = tmp_path / "jobs" / "j1" / "logs"
    logs.mkdir(parents=True)
    (logs / "training.log").write_text("step 1 loss 2\n")
    (logs / "rule-LossNotDecreasing.log").write_text("rule says hi\n")
    assert CliRunner().invoke(cli, ["logs", "j1"]).output == "step 1 loss 2\n"
    assert CliRunner().invoke(cli, ["logs", "j1", "--rule", "LossNotDecreasing"]).output == "rule says hi\n"
    result = CliRunner().invoke(cli, ["logs", "j1", "--rule", "Other"])
    assert result.exit_code == 1
    assert "no rule 'Other' log (rules with logs: LossNotDecreasing)" in result.output
    result = CliRunner().invoke(cli, ["stop", "j1"])
    assert result.exit_code == 0 and result.output == "job j1 is not running\n"


def test_stop_asks_the_running_launcher(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from sdlocal.launcher.job.registry import StopFileWatcher, register, unregister

    monkeypatch.setenv("SDLOCAL_HOME", str(tmp_path))
    job_dir = tmp_path / "somewhere" / "j2"
    job_dir.mkdir(parents=True)
    register(tmp_path, "j2", job_dir)  # this test process plays the running launcher
    stopped = threading.Event()
    watcher = StopFileWatcher(job_dir, stopped, interval=0.05).start()
    ender = threading.Thread(target=lambda: stopped.wait(30) and unregister(tmp_path, "j2"))
    ender.start()
    try:
        result = CliRunner().invoke(cli, ["stop", "j2", "--timeout", "30"])
    finally:
        ender.join(30)
        watcher.close()
    assert stopped.is_set()
    assert result.exit_code == 0 and result.output == "stopped job j2\n"


def test_docker_runtime_missing_image_is_one_line(tmp_path: Path) -> None:
    import docker.errors

    from sdlocal.launcher.errors import RuntimeLaunchError
    from sdlocal.launcher.runtime.selection import select_runtime

    class Images:
        def get(self, name: str) -> None:
            raise docker.errors.ImageNotFound(name)

    class Client:
        images = Images()

        def close(self) -> None:
            pass

    with pytest.raises(RuntimeLaunchError) as err:
        select_runtime("docker", rule_images=[None], training_image=None, docker_client=Client)
    message = str(err.value)
    assert "sdlocal-training:" in message and "sdlocal-evaluator:" in message
    assert "`sdlocal images build`" in message and "\n" not in message
    lines: list[str] = []
    with pytest.raises(RuntimeLaunchError, match="RuleEvaluatorImage my-rules:latest not found"):
        select_runtime("docker", rule_images=["my-rules:latest"], training_image=None,
                       docker_client=lambda: _Only({"sdlocal-training", "sdlocal-evaluator"}))
    runtime = select_runtime("auto", rule_images=[None], training_image=None, docker_client=Client, echo=lines.append)
    assert type(runtime).__name__ == "ProcessRuntime" and lines[0].startswith("Runtime: process (image sdlocal-")


class _Only:
    """A docker client stand-in that has the images whose repository is in `repos`."""

    def __init__(self, repos: set[str]) -> None:
        self.repos = repos
        self.images = self

    def get(self, name: str) -> None:
        import docker.errors

        if name.split(":")[0] not in self.repos:
            raise docker.errors.ImageNotFound(name)

    def close(self) -> None:
        pass


def test_process_runtime_warns_about_a_custom_rule_image(tmp_path: Path, moto_server: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SDLOCAL_HOME", str(tmp_path / "home"))
    (tmp_path / "train.py").write_text("print('no hook, no tensors')\n")
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "EntryPoint: train.py\nDebugHookConfig: {S3OutputPath: s3://sdlocal/jobs}\n"
        "DebugRuleConfigurations:\n"
        "  - {RuleConfigurationName: Mine, RuleEvaluatorImage: 'my-rules:latest',"
        " RuleParameters: {rule_to_invoke: AllZero, collection_names: weights}}\n"
    )
    result = CliRunner().invoke(cli, ["run", str(spec), "--runtime", "process", "--job-name", "warn-image",
                                      "--s3-endpoint-url", moto_server, "--work-dir", str(tmp_path / "work")])
    warnings = [line for line in result.output.splitlines() if "is not run by the process runtime" in line]
    assert warnings == ["Warning: Mine: RuleEvaluatorImage my-rules:latest is not run by the process runtime; "
                        "using the built-in evaluator"]
    assert "Training job warn-image: Completed" in result.output
    assert result.exit_code == 0, result.output


def test_run_of_a_job_already_running_is_refused(tmp_path: Path, moto_server: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A second `sdlocal run` of a running job name must neither start nor take over (and then
    delete) the running launcher's record: `sdlocal stop` would no longer find that launcher."""
    import subprocess
    import sys

    from sdlocal.launcher.job.registry import find_running, register

    home = tmp_path / "home"
    monkeypatch.setenv("SDLOCAL_HOME", str(home))
    (tmp_path / "train.py").write_text("print('should not run')\n")
    first = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # the running launcher
    try:
        register(home, "busy", tmp_path / "first", pid=first.pid)
        result = CliRunner().invoke(cli, ["run", "--entry-point", "train.py", "--source-dir", str(tmp_path),
                                          "--job-name", "busy", "--runtime", "process", "--overwrite",
                                          "--s3-endpoint-url", moto_server, "--work-dir", str(tmp_path / "work")])
        running = find_running(home, "busy")
    finally:
        first.kill()
        first.wait(30)
    assert result.exit_code == 1, result.output
    assert result.output.splitlines()[-1] == (f"Error: Training job busy is already running (sdlocal run, pid "
                                              f"{first.pid}); choose another --job-name")
    assert running is not None and running.pid == first.pid and running.job_dir == tmp_path / "first"
    assert not (tmp_path / "work").exists()


def test_rules_lists_the_recommended_set() -> None:
    from sdlocal.evaluator.recommended import RECOMMENDED

    recommended = CliRunner().invoke(cli, ["rules"]).output.split("\n\n")[-1].splitlines()
    assert recommended[0].startswith("Recommended set (RecommendedRules: `sdlocal run --recommended-rules`")
    assert [line.split()[0] for line in recommended[1:]] == [r.name for r in RECOMMENDED]
    rows = json.loads(CliRunner().invoke(cli, ["rules", "--json"]).output)
    assert {r["name"] for r in rows if r["recommended"]} == {r.name for r in RECOMMENDED}
