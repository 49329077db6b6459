"""`sdlocal evaluate` on the trials written by the real smdebug hook gives MANIFEST.md's verdicts.

(tests/evaluator/test_fixture_trials.py checks every rule × trial cell through the API; this
drives the command users run, on the MANIFEST's own rows.)
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sdlocal.launcher.cli import cli

HEALTHY_SILENT = [("ExplodingTensor", []), ("VanishingGradient", []),
                  ("AllZero", ["collection_names=weights"]), ("UnchangedTensor", ["collection_names=weights"])]
MUST_FIRE = [
    ("exploding", "ExplodingTensor", []),
    ("vanishing", "VanishingGradient", []),
    ("dead_relu", "VanishingGradient", []),  # dead ReLUs pass no gradient back
    ("flat_loss", "LossNotDecreasing", []),
    ("flat_loss", "UnchangedTensor", ["collection_names=losses"]),
    ("flat_loss", "UnchangedTensor", ["collection_names=weights"]),
    ("zero_weights", "AllZero", ["collection_names=weights"]),
]
CASES = [(t, r, p, "NoIssuesFound") for t in ("healthy", "healthy_eval", "healthy_relu") for r, p in HEALTHY_SILENT]
CASES += [(t, r, p, "IssuesFound") for t, r, p in MUST_FIRE]


@pytest.mark.parametrize(("trial", "rule", "params", "expected"), CASES)
def test_sdlocal_evaluate_manifest(fixture_trials: Path, trial: str, rule: str, params: list[str],
                                   expected: str) -> None:
    args = ["evaluate", str(fixture_trials / trial), "--rule", rule, "--json"]
    for p in params:
        args += ["--param", p]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    (status,) = json.loads(result.stdout)
    assert status["RuleEvaluationStatus"] == expected, status["StatusDetails"]
    assert status["RuleConfigurationName"] == rule
