"""The real-world suite (detection/realworld, issue 28): each case's bug is caught by its own rule,
and no rule beyond Debugger fires on its fix or its healthy neighbour. Real trainings through the
hook, judged by `evaluate_trial`. The cases that start processes of their own (DataLoader workers,
2 DDP processes) are slow tests."""
from __future__ import annotations

from pathlib import Path

import pytest

from detection.realworld.cases import CASES, Case
from detection.realworld.run import RULES, run_case

RUNS = [pytest.param(case, variant, id=f"{case.name}-{variant}",
                     marks=[pytest.mark.slow] if case.slow else [])
        for case in CASES for variant in case.variants]


@pytest.mark.parametrize(("case", "variant"), RUNS)
def test_case(case: Case, variant: str, tmp_path: Path) -> None:
    result = run_case(case, variant, tmp_path)
    verdicts = result["verdicts"]
    assert not [v for v in verdicts.values() if v not in ("IssuesFound", "NoIssuesFound")], verdicts
    if variant == "buggy":
        assert verdicts[case.rule] == "IssuesFound", verdicts
    else:
        assert [r for r in RULES if verdicts[r] == "IssuesFound"] == [], verdicts


def test_the_report_lists_every_case_and_rule() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "detection-realworld.md").read_text()
    for case in CASES:
        assert f"**{case.name}**" in text
    for rule in RULES:
        assert f"| {rule} |" in text
