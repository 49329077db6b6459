"""Custom rules written for smdebug run unmodified (sdlocal's smdebug, no real one installed here) under `sdlocal evaluate`
and `sdlocal run`; a two-trial rule over two real trials in moto; a custom rule that raises or
fails to import ends `Error` with its traceback's last line in StatusDetails."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sdlocal.launcher.cli import cli
from sdlocal.trial.smdebug_shim import compat_dir
from tests.evaluator.test_main import upload_dir

CUSTOM_RULES = Path(__file__).resolve().parents[3] / "custom_rules"
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

RAISES = '''from smdebug.rules.rule import Rule


class Raises(Rule):
    def __init__(self, base_trial):
        super().__init__(base_trial)

    def invoke_at_step(self, step):
        return 1 / (step - step)
'''

BAD_IMPORT = '''import not_a_module_anywhere
from smdebug.rules.rule import Rule


class BadImport(Rule):
    def invoke_at_step(self, step):
        return False
'''


def evaluate(*args: str) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(cli, ["evaluate", *args, "--json"])
    return result.exit_code, json.loads(result.stdout)[0]


def test_the_real_smdebug_is_not_installed_here() -> None:
    # the rules below import sdlocal's smdebug (compat/), never the real one
    spec = importlib.util.find_spec("smdebug")
    assert spec is not None and spec.origin is not None
    assert Path(spec.origin).parent.parent == compat_dir()


@pytest.mark.parametrize(("trial", "expected"), [("vanishing", "IssuesFound"), ("healthy", "NoIssuesFound")])
def test_documented_req_tensors_rule_with_action_str(fixture_trials: Path, trial: str, expected: str) -> None:
    code, status = evaluate(str(fixture_trials / trial),
                            "--custom-rule", f"{CUSTOM_RULES / 'vanishing_gradient_rule.py'}:VanishingGradientRule")
    assert code == 0 and status["RuleEvaluationStatus"] == expected, status


@pytest.mark.slow
def test_two_trial_rule_over_two_trials_in_moto(fixture_trials: Path, s3_client: Any, bucket: str,
                                                moto_server: str) -> None:
    for name in ("healthy", "exploding"):
        upload_dir(s3_client, bucket, fixture_trials / name, f"jobs/{name}/debug-output")
    rule = f"{CUSTOM_RULES / 'compare_trials_rule.py'}:CompareTrialsRule"
    base = f"s3://{bucket}/jobs/healthy/debug-output"
    code, status = evaluate(base, "--custom-rule", rule, "--s3-endpoint-url", moto_server,
                            "--param", f"other_trial_0=s3://{bucket}/jobs/healthy/debug-output")
    assert code == 0 and status["RuleEvaluationStatus"] == "NoIssuesFound", status
    assert status["LastEvaluatedStep"] == 59
    code, status = evaluate(base, "--custom-rule", rule, "--s3-endpoint-url", moto_server,
                            "--param", f"other_trials=s3://{bucket}/jobs/exploding/debug-output")
    assert code == 0 and status["RuleEvaluationStatus"] == "IssuesFound", status
    code, status = evaluate(base, "--custom-rule", rule, "--s3-endpoint-url", moto_server)
    assert code == 1 and status["RuleEvaluationStatus"] == "Error"
    assert "needs another trial" in status["StatusDetails"]


def test_custom_rule_errors_under_evaluate(fixture_trials: Path, tmp_path: Path) -> None:
    (tmp_path / "raises.py").write_text(RAISES)
    (tmp_path / "bad_import.py").write_text(BAD_IMPORT)
    code, status = evaluate(str(fixture_trials / "healthy"), "--custom-rule", f"{tmp_path / 'raises.py'}:Raises")
    assert code == 1 and status["RuleEvaluationStatus"] == "Error"
    assert status["StatusDetails"] == "ClientError: Rule Raises failed at step 0: ZeroDivisionError: division by zero"
    code, status = evaluate(str(fixture_trials / "healthy"), "--custom-rule", f"{tmp_path / 'bad_import.py'}:BadImport")
    assert code == 1 and status["RuleEvaluationStatus"] == "Error"
    assert status["StatusDetails"].startswith("ClientError: Custom rule file ")
    assert status["StatusDetails"].endswith("failed to load: ModuleNotFoundError: No module named 'not_a_module_anywhere'")


@pytest.mark.slow
def test_custom_rules_under_sdlocal_run(tmp_path: Path, s3_client: Any, bucket: str, moto_server: str,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A real (short) training with the hook; four custom rules from local files: two documented
    ones run unmodified, one raises, one fails to import."""
    (tmp_path / "raises.py").write_text(RAISES)
    (tmp_path / "bad_import.py").write_text(BAD_IMPORT)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    args = ["run", "--entry-point", "train.py", "--source-dir", str(EXAMPLES), "-p", "steps=6", "-p", "samples=256",
            "--job-name", "custom-rules-1", "--work-dir", str(tmp_path / "job"), "--s3-output-path", f"s3://{bucket}/out",
            "--s3-endpoint-url", moto_server, "--hook-param", "save_interval=1", "--collection", "gradients",
            "--custom-rule", f"{CUSTOM_RULES / 'custom_gradient_rule.py'}:CustomGradientRule", "--rule-param", "threshold=1e9",
            "--custom-rule", f"{CUSTOM_RULES / 'vanishing_gradient_rule.py'}:VanishingGradientRule",
            "--rule-param", "threshold=1e9",
            "--custom-rule", f"{tmp_path / 'raises.py'}:Raises",
            "--custom-rule", f"{tmp_path / 'bad_import.py'}:BadImport",
            "--poll-interval", "0.2", "--rule-timeout", "120", "--json"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    statuses = {s["RuleConfigurationName"]: s for s in json.loads(result.stdout)}
    assert statuses["CustomGradientRule"]["RuleEvaluationStatus"] == "NoIssuesFound", statuses
    assert statuses["VanishingGradientRule"]["RuleEvaluationStatus"] == "IssuesFound", statuses  # every |mean| < 1e9
    assert statuses["Raises"]["RuleEvaluationStatus"] == "Error"
    assert statuses["Raises"]["StatusDetails"].endswith("ZeroDivisionError: division by zero")
    assert statuses["BadImport"]["RuleEvaluationStatus"] == "Error"
    assert statuses["BadImport"]["StatusDetails"].endswith("ModuleNotFoundError: No module named 'not_a_module_anywhere'")
    keys = {o["Key"] for o in s3_client.list_objects_v2(Bucket=bucket, Prefix="out/custom-rules-1/rule-code/")["Contents"]}
    assert keys == {"out/custom-rules-1/rule-code/CustomGradientRule/custom_gradient_rule.py",
                    "out/custom-rules-1/rule-code/VanishingGradientRule/vanishing_gradient_rule.py",
                    "out/custom-rules-1/rule-code/Raises/raises.py",
                    "out/custom-rules-1/rule-code/BadImport/bad_import.py"}


LOOPS = '''from smdebug.rules.rule import Rule


class Loops(Rule):
    def __init__(self, base_trial):
        super().__init__(base_trial)

    def invoke_at_step(self, step):
        while step >= 3:
            pass
        return False
'''
HANGS_AT_IMPORT = '''import time

while True:
    time.sleep(0.05)


class HangsAtImport:
    pass
'''
EXITS_AT_IMPORT = '''import os

print("leaving now")
os._exit(7)


class ExitsAtImport:
    pass
'''


@pytest.mark.parametrize(("name", "source", "details", "note"), [
    ("Loops", LOOPS, "ClientError: Rule Loops: step 3 did not return within the rule timeout of 2 s (--rule-timeout): "
                     "the evaluator was stopped", r"Rule Loops: step 3 has been evaluating for \d+ s \(limit 2 s\)"),
    ("HangsAtImport", HANGS_AT_IMPORT,
     "ClientError: Rule HangsAtImport: the import of custom rule file hangs_at_import.py did not return within the "
     "rule timeout of 2 s (--rule-timeout): the evaluator was stopped",
     r"Rule HangsAtImport: the import of custom rule file hangs_at_import.py has been running for \d+ s \(limit 2 s\)"),
    ("ExitsAtImport", EXITS_AT_IMPORT,
     "ClientError: the rule evaluator exited (code 7) during the import of custom rule file exits_at_import.py, "
     "without a final status. Last log lines: leaving now", r"leaving now"),
])
def test_a_rule_that_hangs_or_exits_under_evaluate_ends_error_saying_so(
        fixture_trials: Path, tmp_path: Path, name: str, source: str, details: str, note: str) -> None:
    import re
    import time

    file = tmp_path / (re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower() + ".py")
    file.write_text(source)
    started = time.monotonic()
    result = CliRunner().invoke(cli, ["evaluate", str(fixture_trials / "healthy"), "--custom-rule", f"{file}:{name}",
                                      "--rule-timeout", "2", "--json"])
    took = time.monotonic() - started
    assert result.exit_code == 1, result.output
    (status,) = json.loads(result.stdout)
    assert status["RuleEvaluationStatus"] == "Error" and status["StatusDetails"] == details
    assert [line for line in result.stderr.splitlines() if re.fullmatch(note, line)], result.stderr  # said on the way
    assert result.stderr.splitlines()[-1] == f"Error: {details}"
    assert took < 60


@pytest.mark.parametrize("value", ["0", "-1", "nan"])
def test_rule_timeout_must_be_positive(fixture_trials: Path, value: str) -> None:
    for command in (["evaluate", str(fixture_trials / "healthy"), "--rule", "VanishingGradient"], ["run"]):
        result = CliRunner().invoke(cli, [*command, "--rule-timeout", value])
        assert result.exit_code == 2
        assert f"Invalid value for '--rule-timeout': {value} is not a number of seconds > 0" in result.stderr


def test_the_cli_default_rule_timeout_is_the_evaluators() -> None:
    from sdlocal.evaluator.watchdog import DEFAULT_RULE_TIMEOUT_S
    from sdlocal.launcher.cli import DEFAULT_RULE_TIMEOUT_S as CLI_DEFAULT

    assert CLI_DEFAULT == DEFAULT_RULE_TIMEOUT_S == 300.0
