"""The documentation's CustomGradientRule in custom_rules/ runs unmodified through `sdlocal evaluate`."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sdlocal.launcher.cli import cli

RULE_FILE = Path(__file__).resolve().parents[3] / "custom_rules" / "custom_gradient_rule.py"


@pytest.mark.parametrize(("trial", "expected"), [("healthy", "NoIssuesFound"), ("exploding", "IssuesFound")])
def test_custom_gradient_rule_example(fixture_trials: Path, trial: str, expected: str) -> None:
    result = CliRunner().invoke(cli, ["evaluate", str(fixture_trials / trial), "--json",
                                      "--custom-rule", f"{RULE_FILE}:CustomGradientRule", "--param", "threshold=20"])
    assert result.exit_code == 0, result.output
    (status,) = json.loads(result.stdout)
    assert status["RuleEvaluationStatus"] == expected, status["StatusDetails"]
