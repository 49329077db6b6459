"""The rules beyond Debugger end to end under `sdlocal run`: an unchanged plain loop
(tests/launcher/data/records_faults/train.py) with one silent error each, hooked by the zero-code
hook, its records uploaded and judged by each rule's own evaluator; the healthy loop judged by all
four. The process runtime here; tests/docker/test_records_rules.py runs the same jobs in containers."""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import run_jobs

SOURCE = Path(__file__).parents[1] / "data" / "records_faults"
FAULTS = {"no_zero_grad": "GradientsNotReset", "eval_in_train": "EvaluationMisuse",
          "frozen_bn": "FrozenParametersChanged", "late_layer": "ParametersNotTraining"}


def spec(tmp_path: Path, job: str, fault: str, rules: list[str], image: str | None = None) -> Path:
    request: dict[str, Any] = {
        "TrainingJobName": job, "EntryPoint": "train.py", "SourceDir": str(SOURCE),
        "HyperParameters": {"fault": fault},
        "DebugHookConfig": {"S3OutputPath": "s3://sdlocal/jobs", "HookParameters": {"save_interval": "1"}},
        "DebugRuleConfigurations": [{"RuleConfigurationName": r, "RuleParameters": {"rule_to_invoke": r}}
                                    for r in rules],
    }
    if image is not None:
        request["AlgorithmSpecification"] = {"TrainingImage": image, "TrainingInputMode": "File"}
    path = tmp_path / f"{job}.yaml"
    path.write_text(yaml.safe_dump(request))
    return path


def run_all(tmp_path: Path, moto_server: str, runtime: str, image: str | None = None) -> dict[str, dict[str, str]]:
    """The four faulty loops (each with its rule) and the healthy one (all four rules), at once."""
    tag = uuid.uuid4().hex[:6]
    names = {f"rf-{fault.replace('_', '-')}": (fault, [rule]) for fault, rule in FAULTS.items()}
    names["rf-none"] = ("none", list(FAULTS.values()))
    specs = {f"{name}-{tag}": spec(tmp_path, f"{name}-{tag}", fault, rules, image)
             for name, (fault, rules) in names.items()}
    verdicts = run_jobs(specs, tmp_path, moto_server, runtime)
    return {job.rsplit("-", 1)[0]: found for job, found in verdicts.items()}


EXPECTED = {**{f"rf-{fault.replace('_', '-')}": {rule: "IssuesFound"} for fault, rule in FAULTS.items()},
            "rf-none": {rule: "NoIssuesFound" for rule in FAULTS.values()}}


@pytest.mark.slow
def test_each_silent_error_is_found_by_its_rule_and_the_healthy_loop_by_none(tmp_path: Path,
                                                                              moto_server: str) -> None:
    assert run_all(tmp_path, moto_server, "process") == EXPECTED
