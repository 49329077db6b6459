"""`sdlocal run` warns, with the numbers, when a rule's collections were saved at fewer than 2 of
the steps the training ran (the SDK's save_interval "500" on a short job)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from sdlocal.launcher.job.steps_to_judge import few_steps_warnings
from sdlocal.launcher.spec.collection_configs import CollectionConfig
from sdlocal.launcher.spec.model import RuleSpec

REPO = Path(__file__).resolve().parents[3]


def rule(name: str, **params: str) -> RuleSpec:
    return RuleSpec(name, {"rule_to_invoke": name, **params}, None, f"s3://b/j/rule-output/{name}", "debugger")


def record(folder: Path, steps: int, scheduled: dict[str, int]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ".sdlocal-steps.json").write_text(json.dumps({"steps": steps, "mode_steps": {}, "scheduled_steps": scheduled}))
    return folder


def test_warns_for_the_rules_whose_collections_were_saved_at_fewer_than_two_steps(tmp_path: Path) -> None:
    tensors = record(tmp_path, 50, {"gradients": 1, "losses": 50})
    lines = few_steps_warnings([rule("VanishingGradient"), rule("LossNotDecreasing"),
                                rule("ExplodingTensor", collection_names="gradients,losses")], tensors,
                               [CollectionConfig("gradients", {"save_interval": "500"})], {})
    assert lines == [
        "Warning: rule VanishingGradient had fewer than 2 steps to judge: the training ran 50 steps and saved "
        "'gradients' at 1 (save_interval 500). Set a smaller save_interval in those collections' "
        "CollectionParameters (DebugHookConfig.CollectionConfigurations).",
        "Warning: rule ExplodingTensor had fewer than 2 steps to judge: the training ran 50 steps and saved "
        "'gradients' at 1 (save_interval 500). Set a smaller save_interval in those collections' "
        "CollectionParameters (DebugHookConfig.CollectionConfigurations).",
    ]


@pytest.mark.parametrize("body", ["", "{", "[]", '{"steps": "50", "scheduled_steps": {}}'])
def test_no_record_or_a_bad_one_warns_of_nothing(tmp_path: Path, body: str) -> None:
    if body:
        (tmp_path / ".sdlocal-steps.json").write_text(body)
    assert few_steps_warnings([rule("VanishingGradient")], tmp_path, [], {}) == []


def test_a_training_of_one_step_and_custom_rules_without_collections_warn_of_nothing(tmp_path: Path) -> None:
    assert few_steps_warnings([rule("VanishingGradient")], record(tmp_path / "a", 1, {"gradients": 1}), [], {}) == []
    custom = RuleSpec("Mine", {"rule_to_invoke": "Mine", "source_s3_uri": "rules.py"}, None, "s3://b/o", "debugger")
    assert few_steps_warnings([custom], record(tmp_path / "b", 50, {"gradients": 1}), [], {}) == []
    # the default schedule is named as such
    (line,) = few_steps_warnings([rule("VanishingGradient")], record(tmp_path / "c", 50, {"gradients": 1}), [], {})
    assert "(save_interval 500, the default)" in line


SPEC = """\
EntryPoint: train.py
SourceDir: {source}
HyperParameters: {{steps: "50", lr: "0.05"}}
DebugHookConfig:
  S3OutputPath: s3://sdlocal/jobs
  CollectionConfigurations:       # as the SageMaker Python SDK writes the rules' collections
    - CollectionName: gradients
      CollectionParameters: {{save_interval: "500"}}
    - CollectionName: losses
      CollectionParameters: {{save_interval: "1"}}
DebugRuleConfigurations:
  - RuleConfigurationName: VanishingGradient
    RuleParameters: {{rule_to_invoke: VanishingGradient}}
  - RuleConfigurationName: LossNotDecreasing
    RuleParameters: {{rule_to_invoke: LossNotDecreasing, num_steps: "10"}}
"""


@pytest.mark.slow
def test_run_warns_when_the_sdk_save_interval_leaves_a_rule_one_step(tmp_path: Path, moto_server: str,
                                                                    s3_client: Any) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(SPEC.format(source=REPO / "examples"))
    job = f"few-steps-{uuid.uuid4().hex[:6]}"
    env = {**os.environ, "SDLOCAL_HOME": str(tmp_path / "home"), "SDLOCAL_RUNTIME": "process"}
    env.pop("AWS_ENDPOINT_URL_S3", None)
    done = subprocess.run([sys.executable, "-m", "sdlocal", "run", str(spec), "--job-name", job,
                           "--s3-endpoint-url", moto_server], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=400)
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if "fewer than 2 steps to judge" in line]
    assert warnings == [
        "Warning: rule VanishingGradient had fewer than 2 steps to judge: the training ran 50 steps and saved "
        "'gradients' at 1 (save_interval 500). Set a smaller save_interval in those collections' "
        "CollectionParameters (DebugHookConfig.CollectionConfigurations)."], done.stderr
    # said before the rules' final statuses, and the record itself never went to S3
    assert done.stderr.index(warnings[0]) < done.stderr.index("Rule VanishingGradient: NoIssuesFound")
    keys = [o["Key"] for o in s3_client.list_objects_v2(Bucket="sdlocal", Prefix=f"jobs/{job}/")["Contents"]]
    assert keys and not any(k.endswith(".sdlocal-steps.json") for k in keys)


def test_saved_steps_are_counted_not_scheduled_ones(tmp_path: Path) -> None:
    folder = record(tmp_path, 40, {"gradients": 40, "losses": 40})
    body = json.loads((folder / ".sdlocal-steps.json").read_text())
    body["saved_steps"] = {"gradients": 40, "losses": 0}  # a loss the hook never saw
    (folder / ".sdlocal-steps.json").write_text(json.dumps(body))
    (line,) = few_steps_warnings([rule("VanishingGradient"), rule("LossNotDecreasing")], folder,
                                 [CollectionConfig("losses", {"save_interval": "1"})], {})
    assert line.startswith("Warning: rule LossNotDecreasing had fewer than 2 steps to judge: the training ran 40 "
                           "steps and saved 'losses' at 0 (save_interval 1, scheduled at 40)."), line


NO_LOSS = """\
import torch

torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
x = torch.randn(64, 4)
y = x.sum(1, keepdim=True)
best = None
for step in range(12):  # a random search: scored, never backpropagated, so the hook sees no loss
    with torch.no_grad():
        err = float((model(x) - y).pow(2).mean())
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.01)
    print(f"step {step} error {err:.4f}", flush=True)
"""

NO_LOSS_SPEC = """\
EntryPoint: search.py
SourceDir: {source}
DebugHookConfig:
  S3OutputPath: s3://sdlocal/jobs
  HookParameters: {{save_interval: "1"}}
DebugRuleConfigurations:
  - RuleConfigurationName: LossNotDecreasing
    RuleParameters: {{rule_to_invoke: LossNotDecreasing}}
"""


@pytest.mark.slow
def test_run_says_a_rule_whose_losses_were_never_saved_judged_nothing(tmp_path: Path, moto_server: str) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "search.py").write_text(NO_LOSS)
    spec = tmp_path / "job.yaml"
    spec.write_text(NO_LOSS_SPEC.format(source=source))
    env = {**os.environ, "SDLOCAL_HOME": str(tmp_path / "home"), "SDLOCAL_RUNTIME": "process"}
    env.pop("AWS_ENDPOINT_URL_S3", None)
    done = subprocess.run([sys.executable, "-m", "sdlocal", "run", str(spec), "--job-name",
                           f"no-loss-{uuid.uuid4().hex[:6]}", "--s3-endpoint-url", moto_server], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if line.startswith("Rule LossNotDecreasing: Error")]
    assert said and said[-1].startswith(
        "Rule LossNotDecreasing: Error (ClientError: Rule LossNotDecreasing judged nothing: no tensor of collection "
        "'losses' was saved: the trial has no step;"), done.stderr  # only the rule's collection was configured
    assert "NoIssuesFound" not in done.stderr
    assert ("Warning: rule LossNotDecreasing had fewer than 2 steps to judge: the training ran 12 steps and saved "
            "'losses' at 0 (save_interval 1, scheduled at 12)") in done.stderr
