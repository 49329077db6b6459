"""Collection precedence (launcher/spec/collection_configs.py, README "Collections") does not depend on the
order of the request's CollectionConfigurations entries: the SageMaker SDK v2 emits its copy of each
rule's default beside the user's entries in an order set by Python's hash seed. Every case is
merged in every order of its entries (itertools.permutations), with and without a HookParameters
schedule; the SDK's real output (side virtualenv) is one of the inputs, and an end-to-end job built
from it gives LossNotDecreasing the steps the user asked for."""
from __future__ import annotations

import itertools
import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from sdlocal.launcher.spec.collection_configs import (
    CollectionConfig,
    merge_collections,
    rule_default_collections,
)
from sdlocal.launcher.spec.model import JobSpec
from sdlocal.launcher.spec.parse import spec_from_request
from tests.serve.conftest import sagemaker_python  # noqa: F401 - the fixture

DATA = Path(__file__).parents[1] / "data"
REPO = Path(__file__).resolve().parents[3]
SCHEDULES: list[dict[str, str]] = [{}, {"save_interval": "10"}]


def C(name: str, **params: str) -> CollectionConfig:  # noqa: N802 - reads like the SDK's CollectionConfig
    return CollectionConfig(name, params)


def merged_in_every_order(entries: list[CollectionConfig], rules: list[str],
                          hook_parameters: dict[str, str]) -> dict[str, dict[str, str]]:
    """The merge of `entries` for `rules`; asserts that every order of the entries gives it."""
    assert len(entries) >= 2, "one order tests nothing"
    defaults = [c for rule in rules for c in rule_default_collections(rule)]
    results = []
    for order in itertools.permutations(entries):
        merged = merge_collections(order, defaults, hook_parameters)
        assert len({c.name for c in merged}) == len(merged)  # one entry per collection
        results.append({c.name: dict(c.parameters) for c in merged})
    assert results and all(r == results[0] for r in results), [r for r in results if r != results[0]][:2]
    print(f"orders merged: {len(results)}")
    return results[0]


# What the SDK sends for rules=[Rule.sagemaker(rule_configs.<rule>())]: ruleConfigs.json's entries
SDK_COPY = {
    "LossNotDecreasing": [C("losses", save_interval="500")],
    "VanishingGradient": [C("gradients", save_interval="500")],
    "FeatureImportanceOverweight": [C("feature_importance", save_interval="500")],
    "CreateXgboostReport": [C("metrics", save_interval="5"), C("feature_importance", save_interval="5"),
                            C("hyperparameters", save_steps="0"), C("predictions", save_interval="5"),
                            C("labels", save_interval="5")],
}


def test_sdk_copies_are_ruleconfigs_entries() -> None:
    """The copies above are what the rules declare (so the merge recognises them as the SDK sends them)."""
    for rule, copies in SDK_COPY.items():
        declared = rule_default_collections(rule)
        assert all(c in declared for c in copies), rule


@pytest.mark.parametrize("hook_parameters", SCHEDULES, ids=["no-schedule", "hook-schedule"])
def test_user_entry_wins_over_the_sdks_copy_in_every_order(hook_parameters: dict[str, str]) -> None:
    entries = [C("losses", save_interval="5"), *SDK_COPY["LossNotDecreasing"]]
    assert merged_in_every_order(entries, ["LossNotDecreasing"], hook_parameters) == {"losses": {"save_interval": "5"}}
    # ... also among other collections, the user's keys merged with the copy's
    entries = [C("losses", save_interval="5"), C("gradients", reductions="mean", save_interval="3"),
               C("weights"), *SDK_COPY["LossNotDecreasing"], *SDK_COPY["VanishingGradient"]]
    merged = merged_in_every_order(entries, ["VanishingGradient", "LossNotDecreasing"], hook_parameters)
    assert merged == {"losses": {"save_interval": "5"}, "gradients": {"reductions": "mean", "save_interval": "3"},
                      "weights": {}}
    # a user entry that sets other keys keeps the copy's schedule (keys only one of them sets are kept)
    entries = [C("losses", reductions="mean"), *SDK_COPY["LossNotDecreasing"]]
    assert merged_in_every_order(entries, ["LossNotDecreasing"], hook_parameters) == {
        "losses": {"reductions": "mean", "save_interval": "500"}}


@pytest.mark.parametrize("hook_parameters", SCHEDULES, ids=["no-schedule", "hook-schedule"])
def test_two_rules_sharing_a_collection(hook_parameters: dict[str, str]) -> None:
    """FeatureImportanceOverweight (500) and CreateXgboostReport (5) both default feature_importance:
    the earlier rule's schedule, whatever the order of the SDK's entries; the user's entry over both."""
    copies = SDK_COPY["FeatureImportanceOverweight"] + SDK_COPY["CreateXgboostReport"]
    first = merged_in_every_order(copies, ["FeatureImportanceOverweight", "CreateXgboostReport"], hook_parameters)
    assert first["feature_importance"] == {"save_interval": "500"}
    assert first["metrics"] == {"save_interval": "5"} and first["hyperparameters"] == {"save_steps": "0"}
    second = merged_in_every_order(copies, ["CreateXgboostReport", "FeatureImportanceOverweight"], hook_parameters)
    assert second["feature_importance"] == {"save_interval": "5"}
    user = merged_in_every_order([C("feature_importance", save_interval="2"), *copies],
                                 ["FeatureImportanceOverweight", "CreateXgboostReport"], hook_parameters)
    assert user["feature_importance"] == {"save_interval": "2"}
    # the rules' defaults that the request does not name: the earlier rule's schedule fills in
    added = merged_in_every_order([C("metrics", save_interval="1"), C("labels")],
                                  ["FeatureImportanceOverweight", "CreateXgboostReport"], hook_parameters)
    expected = {} if hook_parameters else {"save_interval": "500"}
    assert added["feature_importance"] == expected and added["metrics"] == {"save_interval": "1"}


@pytest.mark.parametrize("hook_parameters", SCHEDULES, ids=["no-schedule", "hook-schedule"])
def test_the_user_spelling_the_500_out(hook_parameters: dict[str, str]) -> None:
    """CollectionConfig("losses", {"save_interval": "500"}) is the SDK's copy (its set keeps one):
    kept as written, HookParameters or not; the user's other entries win over the other copies."""
    entries = [C("losses", save_interval="500"), C("gradients", save_interval="3"), *SDK_COPY["VanishingGradient"],
               C("relu_output", include_regex=".*relu_output", save_interval="500")]
    merged = merged_in_every_order(entries, ["LossNotDecreasing", "VanishingGradient", "DeadRelu"], hook_parameters)
    assert merged == {"losses": {"save_interval": "500"}, "gradients": {"save_interval": "3"},
                      "relu_output": {"include_regex": ".*relu_output", "save_interval": "500"}}
    # the rules' defaults the request leaves out give way to the hook's schedule
    merged = merged_in_every_order([C("losses", save_interval="500"), C("weights")],
                                   ["LossNotDecreasing", "VanishingGradient"], hook_parameters)
    assert merged["gradients"] == ({} if hook_parameters else {"save_interval": "500"})


def sdk_requests(python: Path, seeds: range = range(8)) -> dict[tuple[str, ...], dict[str, Any]]:
    """The real SDK's DebugHookConfig + DebugRuleConfigurations, one per distinct entry order seen
    over these hash seeds (keyed by the order of the losses entries' save_interval)."""
    found: dict[tuple[str, ...], dict[str, Any]] = {}
    for seed in seeds:
        env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), "PYTHONHASHSEED": str(seed),
               "SAGEMAKER_SUPPRESS_V2_WARNING": "1", "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}  # nothing is sent
        proc = subprocess.run([str(python), str(DATA / "sdk_collections.py")], env=env, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-3000:]
        body = json.loads(proc.stdout.split("SDK-REQUEST ", 1)[1].splitlines()[0])
        order = tuple(c.get("CollectionParameters", {}).get("save_interval", "")
                      for c in body["DebugHookConfig"]["CollectionConfigurations"])
        found.setdefault(order, body)
    return found


def _spec(body: dict[str, Any], src: Path) -> JobSpec:
    return spec_from_request({"EntryPoint": "train.py", **body}, base_dir=src)


def test_the_real_sdks_requests_in_every_order(sagemaker_python: Path, tmp_path: Path) -> None:  # noqa: F811
    (tmp_path / "train.py").write_text("print('hi')\n")
    found = sdk_requests(sagemaker_python)
    # the SDK sends the user's losses entry and its rule copy, in both orders across hash seeds
    assert set(found) == {("5", "500"), ("500", "5")}, list(found)
    for body in found.values():
        hook = body["DebugHookConfig"]
        assert hook["HookParameters"] == {"save_interval": "10"}
        entries = hook["CollectionConfigurations"]
        for order in itertools.permutations(entries):
            spec = _spec({**body, "DebugHookConfig": {**hook, "CollectionConfigurations": list(order)}}, tmp_path)
            assert spec.hook is not None
            assert {c.name: dict(c.parameters) for c in spec.hook.collections} == {"losses": {"save_interval": "5"}}


@pytest.mark.slow
def test_sdk_request_job_gives_loss_not_decreasing_the_users_steps(sagemaker_python: Path, tmp_path: Path,  # noqa: F811
                                                                    moto_server: str, s3_client: Any) -> None:
    """The SDK's request in the order that lost before (the user's entry first, the rule's copy
    last), run as a 40-step job: the loss is saved every 5 steps and LossNotDecreasing (num_steps 10)
    judges it at steps 10, 20 and 30 (at step 0 alone before: nothing to compare)."""
    import yaml

    from sdlocal.trial import create_trial
    from tests.launcher.e2e.test_e2e import sdlocal

    body = sdk_requests(sagemaker_python, range(4))[("5", "500")]
    job = f"sdk-coll-{uuid.uuid4().hex[:6]}"
    request = {"TrainingJobName": job, "EntryPoint": "train.py", "SourceDir": str(REPO / "examples"),
               "HyperParameters": {"steps": "40", "lr": "0.05"}, **body}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(request))
    proc = sdlocal(["run", str(path), "--runtime", "process"], tmp_path, moto_server)
    out, err = proc.communicate(timeout=400)
    assert proc.returncode == 0, err[-4000:]
    assert "fewer than 2 steps" not in err, err[-4000:]
    statuses = {s["RuleConfigurationName"]: s["RuleEvaluationStatus"] for s in json.loads(out)}
    assert statuses == {"LossNotDecreasing": "NoIssuesFound"}
    trial = create_trial(tmp_path / "jobs" / job / "output" / "tensors")
    losses = trial.tensor_names(collection="losses")
    assert losses and trial.tensor(losses[0]).steps() == list(range(0, 40, 5))
    rule_log = (tmp_path / "jobs" / job / "logs" / "rule-LossNotDecreasing.log").read_text()
    print(rule_log[-2000:])
