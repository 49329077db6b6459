"""The bad-input corpus (issue 11, item 4): each case runs the real `sdlocal` CLI in a subprocess
and checks what a user gets: a non-zero exit, exactly one `Error:` line naming the culprit (file,
field, path or S3 key), no traceback, no process of the job left running, nothing of an earlier
job lost."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import run_sdlocal
from tests.launcher._procs import gone

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples"


def sdlocal(args: list[str], home: Path, *, endpoint: str | None, cwd: Path, env: dict[str, str] | None = None,
            timeout: float = 180) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SDLOCAL_"))}
    extra = dict(env) if env is not None else {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                                               "AWS_DEFAULT_REGION": "us-east-1"}
    if endpoint:  # never the embedded S3 server: it would outlive the test by design
        extra["AWS_ENDPOINT_URL_S3"] = endpoint
    return run_sdlocal(*args, home=home, cwd=cwd, base=clean, env=extra, timeout=timeout)


def processes_of(home: Path) -> list[int]:
    """Live processes started for this SDLOCAL_HOME (children inherit it): none may be left."""
    marker = f"SDLOCAL_HOME={home}".encode()
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        if marker in environ.split(b"\0") and not gone(int(proc.name)):
            pids.append(int(proc.name))
    return pids


def one_error_line(result: subprocess.CompletedProcess[str], *culprits: str) -> str:
    assert result.returncode not in (0, None), result
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.stderr
    for culprit in culprits:
        assert culprit in errors[0], errors[0]
    return errors[0]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("print('training')\n")
    return tmp_path


def _base_request() -> dict[str, Any]:
    return {"TrainingJobName": "bad-input", "EntryPoint": "train.py", "SourceDir": "src",
            "DebugHookConfig": {"S3OutputPath": "s3://sdlocal/jobs", "HookParameters": {"save_interval": "2"},
                                "CollectionConfigurations": [{"CollectionName": "weights"}]},
            "DebugRuleConfigurations": [{"RuleConfigurationName": "VG",
                                         "RuleParameters": {"rule_to_invoke": "VanishingGradient"}}]}


def _with(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    request = _base_request()
    target: Any = request
    for key in path[:-1]:
        target = target.setdefault(key, {}) if isinstance(target, dict) else target[key]
    target[path[-1]] = value
    return request


_DEEP_JSON = "[" * 10_000 + "]" * 10_000
_DEEP_YAML = "".join("  " * i + "k:\n" for i in range(2_000))  # indented: 4 MB, past Python's recursion limit
_LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"a{i}: &a{i} [{', '.join(['*a' + (str(i - 1) if i > 1 else '')] * 9)}]\n" for i in range(1, 10))

# (case id, file name, bytes or request, culprits the one line must name)
SPEC_FILES: list[tuple[str, str, bytes | dict[str, Any], tuple[str, ...]]] = [
    ("random-bytes", "spec.json", bytes(range(256)) * 4, ("spec.json", "not UTF-8")),
    ("latin-1-yaml", "spec.yaml", "EntryPoint: tr\u00e4in.py\n".encode("latin-1"), ("spec.yaml", "not UTF-8")),
    ("nul-bytes-yaml", "spec.yaml", b"EntryPoint: \x00\n", ("spec.yaml", "malformed YAML")),
    ("deep-json", "spec.json", _DEEP_JSON.encode(), ("spec.json", "nests deeper")),
    ("deep-yaml", "spec.yaml", _DEEP_YAML.encode(), ("spec.yaml", "nests deeper")),
    ("deep-yaml-flow", "spec.yaml", _DEEP_JSON.encode(), ("spec.yaml", "nests deeper")),
    ("yaml-aliases", "spec.yaml", _LAUGHS.encode(), ("spec.yaml", "more than")),
    ("not-a-map", "spec.json", b"[1, 2]", ("spec.json", "map of request fields")),
    ("truncated-json", "spec.json", b'{"EntryPoint": "train.py"', ("spec.json", "malformed JSON")),
    ("job-name-path", "spec.json", _with(("TrainingJobName",), "../x"), ("TrainingJobName", "../x")),
    ("job-name-slash", "spec.json", _with(("TrainingJobName",), "a/b"), ("TrainingJobName",)),
    ("job-name-too-long", "spec.json", _with(("TrainingJobName",), "a" * 64), ("TrainingJobName",)),
    ("job-name-number", "spec.json", _with(("TrainingJobName",), 0), ("TrainingJobName",)),
    ("entry-point-list", "spec.json", _with(("EntryPoint",), ["train.py"]), ("EntryPoint",)),
    ("entry-point-up", "spec.json", _with(("EntryPoint",), "../x.py"), ("EntryPoint", "relative to its SourceDir")),
    ("entry-point-absolute", "spec.json", _with(("EntryPoint",), "/etc/passwd"), ("EntryPoint",)),
    ("entry-point-too-long", "spec.json", _with(("EntryPoint",), "a" * 5000 + ".py"), ("EntryPoint",)),
    ("source-dir-number", "spec.json", _with(("SourceDir",), 3), ("SourceDir",)),
    ("source-dir-nul", "spec.json", _with(("SourceDir",), "sr\x00c"), ("SourceDir",)),
    ("hyperparameters-list", "spec.json", _with(("HyperParameters",), ["lr"]), ("HyperParameters",)),
    ("hyperparameter-map", "spec.json", _with(("HyperParameters", "lr"), {"a": 1}), ("HyperParameters.lr",)),
    ("hyperparameter-nul", "spec.json", _with(("HyperParameters", "lr"), "0.\x001"), ("HyperParameters.lr", "NUL")),
    ("environment-key", "spec.json", _with(("Environment",), {"1BAD": "x"}), ("Environment", "1BAD")),
    ("training-image-number", "spec.json", _with(("AlgorithmSpecification", "TrainingImage"), 5),
     ("AlgorithmSpecification.TrainingImage",)),
    ("input-mode", "spec.json", _with(("AlgorithmSpecification", "TrainingInputMode"), "Stream"),
     ("AlgorithmSpecification.TrainingInputMode",)),
    ("channels-map", "spec.json", _with(("InputDataConfig",), {"train": "s3://b/x"}), ("InputDataConfig",)),
    ("channel-data-source-keys", "spec.json",
     _with(("InputDataConfig",), [{"ChannelName": "train", "DataSource": {"1": 2}}]), ("InputDataConfig[0]",)),
    ("instance-type", "spec.json", _with(("ResourceConfig", "InstanceType"), "ml.huge"), ("ResourceConfig.InstanceType",)),
    ("instance-count", "spec.json", _with(("ResourceConfig", "InstanceCount"), "two"), ("ResourceConfig.InstanceCount",)),
    ("output-path-empty", "spec.json", _with(("OutputDataConfig", "S3OutputPath"), ""), ("OutputDataConfig.S3OutputPath",)),
    ("hook-output-path", "spec.json", _with(("DebugHookConfig", "S3OutputPath"), "/tmp/x"),
     ("DebugHookConfig.S3OutputPath",)),
    ("hook-local-path", "spec.json", _with(("DebugHookConfig", "LocalPath"), 7), ("DebugHookConfig.LocalPath",)),
    ("hook-parameters-list", "spec.json", _with(("DebugHookConfig", "HookParameters"), ["save_interval"]),
     ("DebugHookConfig.HookParameters",)),
    ("save-interval-negative", "spec.json", _with(("DebugHookConfig", "HookParameters"), {"save_interval": "-1"}),
     ("DebugHookConfig.HookParameters.save_interval", ">= 1")),
    ("save-interval-word", "spec.json", _with(("DebugHookConfig", "HookParameters"), {"save_interval": "often"}),
     ("DebugHookConfig.HookParameters.save_interval",)),
    ("hook-parameter-typo", "spec.json", _with(("DebugHookConfig", "HookParameters"), {"save_intervall": "2"}),
     ("DebugHookConfig.HookParameters.save_intervall", "did you mean save_interval")),
    ("reductions-unknown", "spec.json", _with(("DebugHookConfig", "HookParameters"), {"reductions": "median"}),
     ("DebugHookConfig.HookParameters.reductions", "median")),
    ("collection-parameter-typo", "spec.json",
     _with(("DebugHookConfig", "CollectionConfigurations"),
           [{"CollectionName": "weights"}, {"CollectionName": "gradients", "CollectionParameters": {"reduction": "mean"}}]),
     ("CollectionConfigurations[1].CollectionParameters.reduction", "did you mean reductions")),
    ("collection-regex", "spec.json",
     _with(("DebugHookConfig", "CollectionConfigurations"),
           [{"CollectionName": "mine", "CollectionParameters": {"include_regex": "("}}]),
     ("CollectionConfigurations[0].CollectionParameters.include_regex",)),
    ("collection-unknown-without-regex", "spec.json",
     _with(("DebugHookConfig", "CollectionConfigurations"), [{"CollectionName": "mine"}]),
     ("CollectionConfigurations[0]", "'mine'")),
    ("collection-name-number", "spec.json",
     _with(("DebugHookConfig", "CollectionConfigurations"), [{"CollectionName": 3}]),
     ("CollectionConfigurations[0].CollectionName",)),
    ("rules-map", "spec.json", _with(("DebugRuleConfigurations",), {"VG": {}}), ("DebugRuleConfigurations",)),
    ("rule-name-path", "spec.json",
     _with(("DebugRuleConfigurations",), [{"RuleConfigurationName": "../r", "RuleParameters": {}}]),
     ("DebugRuleConfigurations[0].RuleConfigurationName",)),
    ("rule-unknown", "spec.json",
     _with(("DebugRuleConfigurations",), [{"RuleConfigurationName": "r",
                                           "RuleParameters": {"rule_to_invoke": "VanishingGradients"}}]),
     ("rule_to_invoke", "VanishingGradients")),
    ("rule-image-map", "spec.json",
     _with(("DebugRuleConfigurations",), [{"RuleConfigurationName": "r", "RuleEvaluatorImage": {},
                                           "RuleParameters": {"rule_to_invoke": "VanishingGradient"}}]),
     ("DebugRuleConfigurations[0].RuleEvaluatorImage",)),
    ("custom-rule-file-empty", "spec.json",
     _with(("DebugRuleConfigurations",), [{"RuleConfigurationName": "r",
                                           "RuleParameters": {"rule_to_invoke": "R", "source_s3_uri": ""}}]),
     ("source_s3_uri",)),
    ("profiling-interval", "spec.json", _with(("ProfilerConfig", "ProfilingIntervalInMilliseconds"), -5),
     ("ProfilerConfig.ProfilingIntervalInMilliseconds",)),
    ("max-runtime-negative", "spec.json", _with(("StoppingCondition", "MaxRuntimeInSeconds"), -1),
     ("StoppingCondition.MaxRuntimeInSeconds",)),
    ("max-runtime-zero", "spec.json", _with(("StoppingCondition", "MaxRuntimeInSeconds"), 0),
     ("StoppingCondition.MaxRuntimeInSeconds",)),
    ("network-isolation-word", "spec.json", _with(("EnableNetworkIsolation",), "yes"), ("EnableNetworkIsolation",)),
    ("tensorboard-local-path", "spec.json", _with(("TensorBoardOutputConfig",), {"S3OutputPath": "s3://b/tb",
                                                                               "LocalPath": []}),
     ("TensorBoardOutputConfig.LocalPath",)),
]


@pytest.mark.parametrize(("name", "content", "culprits"), [c[1:] for c in SPEC_FILES],
                         ids=[c[0] for c in SPEC_FILES])
def test_bad_spec_files(workspace: Path, moto_server: str, name: str, content: bytes | dict[str, Any],
                        culprits: tuple[str, ...]) -> None:
    home = workspace / "home"
    earlier = home / "jobs" / "bad-input"  # an earlier job of the same name: nothing of it may be lost
    earlier.mkdir(parents=True)
    (earlier / "job.json").write_text('{"TrainingJobName": "bad-input"}')
    (earlier / "logs").mkdir()
    (earlier / "logs" / "training.log").write_text("earlier run\n")
    before = sorted((p.relative_to(earlier), p.read_bytes()) for p in earlier.rglob("*") if p.is_file())
    spec = workspace / name
    spec.write_bytes(content if isinstance(content, bytes) else json.dumps(content).encode())
    result = sdlocal(["run", str(spec), "--overwrite"], home, endpoint=moto_server, cwd=workspace)
    one_error_line(result, *culprits)
    assert sorted((p.relative_to(earlier), p.read_bytes()) for p in earlier.rglob("*") if p.is_file()) == before
    assert sorted(p.name for p in (home / "jobs").iterdir()) == ["bad-input"]  # no other job folder made
    assert not (home / "running").exists() or not list((home / "running").iterdir())
    assert processes_of(home) == []


def test_entry_point_symlinked_out_of_its_source_dir(workspace: Path, moto_server: str) -> None:
    (workspace / "outside.py").write_text("print('not yours')\n")
    (workspace / "src" / "link.py").symlink_to(workspace / "outside.py")
    result = sdlocal(["run", "--entry-point", "link.py", "--source-dir", "src"], workspace / "home",
                     endpoint=moto_server, cwd=workspace)
    one_error_line(result, "EntryPoint", "leads out of the source directory")
    assert not (workspace / "home" / "jobs").exists()


# Flags and arguments (`sdlocal <args>`): one line, usage errors (exit 2) included
FLAG_CASES: list[tuple[str, list[str], tuple[str, ...]]] = [
    ("logs-up", ["logs", "../x"], ("JOB_NAME", "../x")),
    ("logs-slash", ["logs", "a/b"], ("JOB_NAME",)),
    ("logs-too-long", ["logs", "a" * 64], ("JOB_NAME",)),
    ("stop-up", ["stop", "../../x"], ("JOB_NAME",)),
    ("summary-up", ["summary", "../x"], ("JOB_NAME",)),
    ("run-job-name", ["run", "--entry-point", "train.py", "--source-dir", "src", "--job-name", "../x"],
     ("TrainingJobName",)),
    ("run-hook-param-typo", ["run", "--entry-point", "train.py", "--source-dir", "src", "--hook-param",
                             "save_intervall=2"], ("save_intervall", "did you mean save_interval")),
    ("run-collection-param", ["run", "--entry-point", "train.py", "--source-dir", "src", "--collection",
                              "weights:save_interval=0"], ("CollectionParameters.save_interval",)),
    ("run-entry-point-up", ["run", "--entry-point", "../train.py", "--source-dir", "src"], ("EntryPoint",)),
    ("run-endpoint-word", ["run", "--entry-point", "train.py", "--source-dir", "src", "--s3-endpoint-url",
                           "notaurl"], ("--s3-endpoint-url", "notaurl")),
    ("run-endpoint-ipv6", ["run", "--entry-point", "train.py", "--source-dir", "src", "--s3-endpoint-url",
                           "http://[::1"], ("--s3-endpoint-url",)),
    ("summary-endpoint-scheme", ["summary", "job", "--s3-endpoint-url", "ftp://host:1"], ("--s3-endpoint-url",)),
    ("evaluate-endpoint-port", ["evaluate", "s3://b/t", "--rule", "VanishingGradient", "--s3-endpoint-url",
                                "http://host:99999"], ("--s3-endpoint-url",)),
    ("run-rule-timeout-negative", ["run", "--entry-point", "train.py", "--rule-timeout", "-1"], ("--rule-timeout",)),
    ("run-poll-interval-zero", ["run", "--entry-point", "train.py", "--poll-interval", "0"], ("--poll-interval",)),
    ("run-finish-timeout-nan", ["run", "--entry-point", "train.py", "--rule-finish-timeout", "nan"],
     ("--rule-finish-timeout",)),
    ("stop-timeout-negative", ["stop", "job", "--timeout", "-5"], ("--timeout",)),
    ("evaluate-rule-timeout-zero", ["evaluate", "trial", "--rule", "VanishingGradient", "--rule-timeout", "0"],
     ("--rule-timeout",)),
    ("evaluate-custom-rule-shape", ["evaluate", "trial", "--custom-rule", "nofile"], ("--custom-rule",)),
]


@pytest.mark.parametrize(("args", "culprits"), [c[1:] for c in FLAG_CASES], ids=[c[0] for c in FLAG_CASES])
def test_bad_flags(workspace: Path, args: list[str], culprits: tuple[str, ...]) -> None:
    home = workspace / "home"
    result = sdlocal(args, home, endpoint=None, cwd=workspace)
    one_error_line(result, *culprits)
    assert not (home / "jobs").exists() and processes_of(home) == []


def test_corrupt_local_job_record_is_named(workspace: Path, moto_server: str) -> None:
    home = workspace / "home"
    record = home / "jobs" / "corrupt" / "job.json"
    record.parent.mkdir(parents=True)
    for body in (b"\xff\xfe not json", b'{"DebugRules": [{"RuleConfigurationName": 1}]}', b"[]"):
        record.write_bytes(body)
        result = sdlocal(["summary", "corrupt"], home, endpoint=moto_server, cwd=workspace)
        one_error_line(result, str(record), "corrupt job record")
        assert record.read_bytes() == body  # reported, never rewritten


def test_corrupt_s3_status_is_named_with_its_key(workspace: Path, moto_server: str, s3_client: Any,
                                                 bucket: str) -> None:
    key = "jobs/st/rule-output/VG/status.json"
    for body in (b"{not json", b'"a string"', b"\x89PNG"):
        s3_client.put_object(Bucket=bucket, Key=key, Body=body)
        result = sdlocal(["summary", "st", "--s3-output-path", f"s3://{bucket}/jobs"], workspace / "home",
                         endpoint=moto_server, cwd=workspace)
        one_error_line(result, f"s3://{bucket}/{key}", "corrupt rule status")


def _upload(s3_client: Any, bucket: str, folder: Path, prefix: str) -> list[str]:
    keys = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        key = f"{prefix}/{path.relative_to(folder)}"
        s3_client.upload_file(str(path), bucket, key)
        keys.append(key)
    return keys


def test_evaluate_on_s3_without_aws_credentials(workspace: Path, moto_server: str, s3_client: Any, bucket: str,
                                                fixture_trials: Path) -> None:
    """An endpoint but no credentials at all (no env, no ~/.aws): dummy ones, as for `run`."""
    _upload(s3_client, bucket, fixture_trials / "vanishing", "nocreds")
    env = {"HOME": str(workspace / "nohome")}
    result = sdlocal(["evaluate", f"s3://{bucket}/nocreds", "--rule", "VanishingGradient", "--s3-endpoint-url",
                      moto_server], workspace / "home", endpoint=None, cwd=workspace, env=env)
    assert result.returncode == 0 and "IssuesFound" in result.stdout, result.stderr


def test_corrupt_s3_tensor_file_is_named_with_its_key(workspace: Path, moto_server: str, s3_client: Any,
                                                      bucket: str, fixture_trials: Path) -> None:
    keys = _upload(s3_client, bucket, fixture_trials / "healthy", "corrupt-trial")
    events = next(k for k in keys if k.endswith(".tfevents"))
    s3_client.put_object(Bucket=bucket, Key=events, Body=b"\x00garbage" * 10)
    result = sdlocal(["evaluate", f"s3://{bucket}/corrupt-trial", "--rule", "ExplodingTensor"], workspace / "home",
                     endpoint=moto_server, cwd=workspace)
    one_error_line(result, f"s3://{bucket}/{events}")
    assert result.returncode == 1 and processes_of(workspace / "home") == []


@pytest.mark.parametrize(("script", "message"), [
    ("import os\ndef f(:\n    pass\n", 'ErrorMessage "SyntaxError: invalid syntax (broken.py, line 2)"'),
    ("import no_such_module_xyz\n", "ErrorMessage \"ModuleNotFoundError: No module named 'no_such_module_xyz'\""),
])
def test_entry_point_that_cannot_start_shows_the_python_error(workspace: Path, moto_server: str, script: str,
                                                              message: str) -> None:
    (workspace / "src" / "broken.py").write_text(script)
    home = workspace / "home"
    job = f"broken-{uuid.uuid4().hex[:8]}"  # the moto server is shared by the session
    result = sdlocal(["run", "--entry-point", "broken.py", "--source-dir", "src", "--job-name", job,
                      "--rule", "VanishingGradient", "--quiet"], home, endpoint=moto_server, cwd=workspace)
    # the launcher's own lines (--quiet: not the training's log, where the traceback is) say it in one line
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert message in result.stderr.splitlines()
    assert processes_of(home) == []
    assert (home / "jobs" / job / "logs" / "training.log").is_file()  # the full traceback is kept there


def test_rule_watching_a_collection_never_saved_is_not_no_issues_found(workspace: Path, moto_server: str) -> None:
    home = workspace / "home"
    result = sdlocal(["run", "--entry-point", "train.py", "--source-dir", str(EXAMPLES), "-p", "steps=6",
                      "--job-name", f"nocoll-{uuid.uuid4().hex[:8]}", "--rule", "ExplodingTensor", "--rule-param", "collection_names=gradeints",
                      "--json"], home, endpoint=moto_server, cwd=workspace, timeout=300)
    assert result.returncode == 0, result.stderr
    (row,) = json.loads(result.stdout)
    assert row["RuleEvaluationStatus"] == "Error"
    assert "no tensor of collection 'gradeints' was saved" in row["StatusDetails"]
    assert "gradients" in row["StatusDetails"]  # the saved ones are listed: the typo shows
    assert processes_of(home) == []


def test_debug_shows_the_traceback(workspace: Path) -> None:
    spec = workspace / "spec.json"
    spec.write_bytes(b"\xff")
    result = sdlocal(["--debug", "run", str(spec)], workspace / "home", endpoint=None, cwd=workspace)
    assert result.returncode == 1 and "Traceback" in result.stderr and "SpecError" in result.stderr



@pytest.mark.parametrize("rule", ["VanishingGradient", "ExplodingTensor"])
def test_evaluate_names_an_events_file_the_index_names_but_that_is_missing(workspace: Path, fixture_trials: Path,
                                                                           rule: str) -> None:
    """A step whose data is lost is not a step that was not saved: `evaluate` ends Error naming the
    file (before, the step was skipped and the rule said NoIssuesFound, exit 0)."""
    trial = workspace / "trial"
    shutil.copytree(fixture_trials / "vanishing", trial)
    events = sorted((trial / "events").rglob("*.tfevents"))[3]
    events.unlink()
    result = sdlocal(["evaluate", str(trial), "--rule", rule], workspace / "home", endpoint=None, cwd=workspace)
    line = one_error_line(result, str(events.relative_to(trial)), "is missing")
    assert "the trial's index names it" in line
