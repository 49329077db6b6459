"""Custom rule files in the style of the public examples (smdebug's documentation: `modes`,
`invoke_rule`, `create_trial`, `smdebug.exceptions`) run unchanged: under `sdlocal evaluate`,
in the evaluator process (`python -m sdlocal.evaluator`, rule file from S3), and as a script in the
user's own Python, where they answer as the real smdebug does on the same trial."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from sdlocal.launcher.cli import cli
from sdlocal.trial import Collection, TrialWriter
from tests.compat.test_smdebug_api import user_env
from tests.conftest import REPO_ROOT
from tests.evaluator.test_main import contract, run_evaluator, status_from_s3, upload_dir

EVAL_LOSS_RULE = REPO_ROOT / "custom_rules" / "eval_loss_rule.py"

BASELINE_RULE = '''
from smdebug import modes
from smdebug.exceptions import *
from smdebug.rules import Rule, invoke_rule  # invoke_rule unused here: the import must work


class WorseThanBaseline(Rule):
    """Compares this run's TRAIN loss with a finished baseline run opened by path."""

    def __init__(self, base_trial, baseline_path, margin="0.5"):
        super().__init__(base_trial, action_str="")
        from smdebug.trials import create_trial  # imported when the rule is built, after loading

        self.baseline = create_trial(baseline_path)
        self.margin = float(margin)

    def invoke_at_step(self, step):
        if self.base_trial.mode(step) != modes.TRAIN:
            return False
        mode_step = self.base_trial.mode_step(step)
        try:
            mine = self.base_trial.tensor("loss").value(mode_step, mode=modes.TRAIN)
            theirs = self.baseline.tensor("loss").value(mode_step, mode=modes.TRAIN)
        except (TensorUnavailableForStep, StepUnavailable):
            return False
        return float(mine) > float(theirs) + self.margin
'''


def evaluate(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["evaluate", *args, "--json"])
    assert result.exit_code in (0, 1), result.output
    return dict(json.loads(result.stdout)[0])


def loss_trial(root: Path, losses: list[float]) -> Path:
    w = TrialWriter(root)
    w.write_collections([Collection("losses", include_regex=("loss",))])
    for s, v in enumerate(losses):
        w.write_step(s, "TRAIN", s, [("loss", np.float32(v))])
    w.write_end_marker()
    return root


def test_eval_loss_rule_under_sdlocal_evaluate(fixture_trials: Path) -> None:
    trial = str(fixture_trials / "healthy_eval")
    status = evaluate(trial, "--custom-rule", f"{EVAL_LOSS_RULE}:EvalLossNotDecreasing")
    assert status["RuleEvaluationStatus"] == "IssuesFound" and "at step 43 " in status["StatusDetails"]
    status = evaluate(trial, "--custom-rule", f"{EVAL_LOSS_RULE}:EvalLossNotDecreasing", "--param", "min_drop=0.02")
    assert status["RuleEvaluationStatus"] == "NoIssuesFound" and status["LastEvaluatedStep"] == 87


def test_rule_opening_another_trial_under_sdlocal_evaluate(tmp_path: Path) -> None:
    (tmp_path / "baseline_rule.py").write_text(BASELINE_RULE)
    baseline = loss_trial(tmp_path / "baseline", [1.0, 0.8, 0.6, 0.5])
    rule = f"{tmp_path / 'baseline_rule.py'}:WorseThanBaseline"
    good = loss_trial(tmp_path / "good", [1.0, 0.9, 0.6, 0.4])
    worse = loss_trial(tmp_path / "worse", [1.0, 0.9, 1.2, 1.3])
    status = evaluate(str(good), "--custom-rule", rule, "--param", f"baseline_path={baseline}")
    assert status["RuleEvaluationStatus"] == "NoIssuesFound", status
    status = evaluate(str(worse), "--custom-rule", rule, "--param", f"baseline_path={baseline}")
    assert status["RuleEvaluationStatus"] == "IssuesFound" and "at step 2 " in status["StatusDetails"], status


@pytest.mark.slow
def test_eval_loss_rule_in_the_evaluator_process(fixture_trials: Path, s3_client: Any, bucket: str,
                                                 moto_server: str) -> None:
    upload_dir(s3_client, bucket, fixture_trials / "healthy_eval", "out/my-job/debug-output")
    s3_client.put_object(Bucket=bucket, Key="code/eval_loss_rule.py", Body=EVAL_LOSS_RULE.read_bytes())
    params = {"rule_to_invoke": "EvalLossNotDecreasing", "source_s3_uri": f"s3://{bucket}/code/eval_loss_rule.py"}
    proc = run_evaluator(contract(bucket, moto_server, "EvalLoss", params))
    assert proc.returncode == 0, proc.stderr
    status = status_from_s3(s3_client, bucket, "EvalLoss")
    assert status["RuleEvaluationStatus"] == "IssuesFound"
    assert status["StatusDetails"].startswith("RuleEvaluationConditionMet: Evaluation of the rule EvalLossNotDecreasing at step 43 ")


def _script(python: str, env: dict[str, str] | None, *args: str) -> tuple[int, str]:
    proc = subprocess.run([python, str(EVAL_LOSS_RULE), *args], env=env, capture_output=True, text=True, timeout=300,
                          cwd="/")
    return proc.returncode, proc.stdout.strip().splitlines()[-1]


def test_eval_loss_rule_as_a_script_in_the_users_python(fixture_trials: Path) -> None:
    trial = str(fixture_trials / "healthy_eval")
    assert _script(sys.executable, user_env(), trial) == (
        1, "Evaluation of the rule EvalLossNotDecreasing at step 43 resulted in the condition being met")
    assert _script(sys.executable, user_env(), trial, "0.02") == (0, "No issues found")


@pytest.mark.interop
@pytest.mark.parametrize("min_drop", ["0.1", "0.02"])
def test_eval_loss_rule_answers_as_with_the_real_smdebug(fixture_trials: Path, smdebug_python: Path,
                                                         min_drop: str) -> None:
    trial = str(fixture_trials / "healthy_eval")
    ours = _script(sys.executable, user_env(), trial, min_drop)
    theirs = _script(str(smdebug_python), None, trial, min_drop)
    assert ours == theirs
