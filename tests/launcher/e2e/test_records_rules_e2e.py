"""The rules beyond Debugger end to end under `sdlocal run`: an unchanged plain loop
(tests/launcher/data/records_faults/train.py) with one silent error each, hooked by the zero-code
hook, its records uploaded and judged by each rule's own evaluator; the healthy loop judged by all
four. The process runtime here; tests/docker/test_records_rules.py runs the same jobs in containers."""
from __future__ import annotations

import concurrent.futures
import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.launcher._smjob import sdlocal

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
    jobs = {f"rf-{fault.replace('_', '-')}-{tag}": spec(tmp_path, f"rf-{fault.replace('_', '-')}-{tag}", fault,
                                                        [rule], image) for fault, rule in FAULTS.items()}
    jobs[f"rf-none-{tag}"] = spec(tmp_path, f"rf-none-{tag}", "none", list(FAULTS.values()), image)
    with_threads: dict[str, subprocess.CompletedProcess[str]] = {}
    with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
        futures = {job: pool.submit(sdlocal, ["run", str(path)], tmp_path, moto_server, runtime, 900)
                   for job, path in jobs.items()}
        for job, future in futures.items():
            with_threads[job] = future.result()
    verdicts = {}
    for job, result in with_threads.items():
        assert result.returncode == 0, (job, result.stderr[-3000:])
        verdicts[job.rsplit("-", 1)[0]] = {s["RuleConfigurationName"]: s["RuleEvaluationStatus"]
                                           for s in json.loads(result.stdout)}
    return verdicts


EXPECTED = {**{f"rf-{fault.replace('_', '-')}": {rule: "IssuesFound"} for fault, rule in FAULTS.items()},
            "rf-none": {rule: "NoIssuesFound" for rule in FAULTS.values()}}


@pytest.mark.slow
def test_each_silent_error_is_found_by_its_rule_and_the_healthy_loop_by_none(tmp_path: Path,
                                                                              moto_server: str) -> None:
    assert run_all(tmp_path, moto_server, "process") == EXPECTED
