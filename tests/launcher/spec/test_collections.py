"""Each built-in rule's default collections (smdebug_rulesconfig + ours), merged as `sdlocal run`
merges them, make our hook save exactly what the rule reads, on a model whose modules are NOT
named like the rules' default regexes (members found by module type / role)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from sdlocal.hook.config import HookConfig
from sdlocal.hook.pytorch import Hook
from sdlocal.launcher.spec.collection_configs import (
    CollectionConfig,
    merge_collections,
    rule_default_collections,
)
from sdlocal.trial import create_trial
from sdlocal.trial.modes import ModeKeys

# What each rule reads (rules.md), as collections of the trial.
RULE_READS: dict[str, tuple[str, ...]] = {
    "VanishingGradient": ("gradients",),
    "LossNotDecreasing": ("losses",),
    "Overfit": ("losses",),
    "Overtraining": ("losses",),
    "WeightUpdateRatio": ("weights",),
    "CheckInputImages": ("input_image",),
    "NLPSequenceRatio": ("input_sequence",),
    "DeadRelu": ("relu_output",),
    "PoorWeightInitialization": ("relu_input", "gradients", "losses"),
    "SaturatedActivation": ("tanh_input", "sigmoid_input"),
    "ClassImbalance": ("labels", "predictions"),
    "Confusion": ("labels", "predictions"),
}
# These inspect whatever collections / regex the user names: no defaults.
USER_NAMED = ("AllZero", "ExplodingTensor", "UnchangedTensor", "TensorVariance", "SimilarAcrossRuns",
              "StalledTrainingRule")
# Members of each collection on _Net (smdebug names; none matches a rule's default regex by name).
MEMBERS: dict[str, list[str]] = {
    "gradients": [f"gradient/_Net_{m}.{p}" for m in ("conv", "emb", "fc0", "fc1", "fc2", "head")
                  for p in ("bias", "weight") if (m, p) != ("emb", "bias")],
    "weights": [f"_Net_{m}.weight" for m in ("conv", "emb", "fc0", "fc1", "fc2", "head")],
    "losses": ["CrossEntropyLoss_output_0"],
    "input_image": ["_Net_input_0"],
    "input_sequence": ["emb_input_0"],
    "relu_input": ["act0_input_0"],
    "relu_output": ["act0_output_0"],
    "tanh_input": ["act1_input_0"],
    "sigmoid_input": ["act2_input_0"],
    "labels": ["CrossEntropyLoss_labels"],
    "predictions": ["CrossEntropyLoss_predictions"],
}


class _Net(nn.Module):
    """Images and token ids in, 3 classes out; one ReLU, one Tanh, one Sigmoid, one Embedding."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.emb = nn.Embedding(20, 4)
        self.fc0, self.act0 = nn.Linear(8, 8), nn.ReLU()
        self.fc1, self.act1 = nn.Linear(8, 8), nn.Tanh()
        self.fc2, self.act2 = nn.Linear(8, 8), nn.Sigmoid()
        self.head = nn.Linear(8, 3)

    def forward(self, images: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        h = torch.cat([self.conv(images).mean(dim=(2, 3)), self.emb(ids).mean(dim=1)], dim=1)
        return self.head(self.act2(self.fc2(self.act1(self.fc1(self.act0(self.fc0(h)))))))


def _train(out: Path, entries: tuple[CollectionConfig, ...], steps: int = 2) -> None:
    torch.manual_seed(0)
    config = HookConfig.from_dict({"LocalPath": str(out), "HookParameters": {"save_interval": "1"},
                                   "CollectionConfigurations": [e.to_request() for e in entries]})
    model, loss_fn = _Net(), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    hook = Hook(config)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    hook.set_mode(ModeKeys.TRAIN)
    for _ in range(steps):
        loss = loss_fn(model(torch.randn(4, 3, 5, 5), torch.randint(0, 20, (4, 6))), torch.randint(0, 3, (4,)))
        opt.zero_grad()
        loss.backward()
        opt.step()
    hook.close()


@pytest.mark.parametrize("rule", sorted(RULE_READS))
def test_rule_defaults_make_the_hook_save_what_the_rule_reads(tmp_path: Path, rule: str) -> None:
    # As `sdlocal run` does with `--hook-param save_interval=1` and only this rule attached.
    merged = merge_collections([], rule_default_collections(rule), {"save_interval": "1"})
    assert {c.name for c in merged} >= set(RULE_READS[rule]) - {"losses"}  # losses: always saved
    _train(tmp_path / "t", merged)
    trial = create_trial(tmp_path / "t")
    assert trial.steps() == [0, 1]
    needed: set[str] = set()
    for coll in RULE_READS[rule]:
        members = trial.tensor_names(collection=coll)
        assert members == sorted(MEMBERS[coll]), coll
        assert all(trial.tensor(n).steps() == [0, 1] for n in members), coll
        needed |= set(members)
    # ... and nothing the rule does not read (the loss is always saved).
    assert set(trial.tensor_names()) == needed | {"CrossEntropyLoss_output_0"}


def test_all_rules_together(tmp_path: Path) -> None:
    defaults = [c for rule in (*RULE_READS, *USER_NAMED) for c in rule_default_collections(rule)]
    merged = merge_collections([], defaults, {"save_interval": "1"})
    assert all(not c.parameters.get("save_interval") for c in merged)  # the hook's schedule wins
    _train(tmp_path / "t", merged)
    trial = create_trial(tmp_path / "t")
    for coll, members in MEMBERS.items():
        assert trial.tensor_names(collection=coll) == sorted(members), coll


@pytest.mark.parametrize("rule", USER_NAMED)
def test_rules_reading_user_named_collections_bring_none(rule: str) -> None:
    assert rule_default_collections(rule) == []


def test_our_defaults_beside_smdebug_rulesconfigs() -> None:
    assert rule_default_collections("ClassImbalance") == [CollectionConfig("labels", {}),
                                                          CollectionConfig("predictions", {})]
    assert [c.name for c in rule_default_collections("SaturatedActivation")] == ["tanh_input", "sigmoid_input"]
    # ruleConfigs.json's entry first, as written there; ours after it.
    assert rule_default_collections("PoorWeightInitialization") == [
        CollectionConfig("relu_input", {"include_regex": ".*relu_input", "save_interval": "500"}),
        CollectionConfig("gradients", {})]
    # A user's entry for the same collection wins (merge rule 2).
    merged = merge_collections([CollectionConfig("labels", {"save_interval": "3"})],
                               rule_default_collections("Confusion"))
    assert merged == (CollectionConfig("labels", {"save_interval": "3"}), CollectionConfig("predictions", {}))
