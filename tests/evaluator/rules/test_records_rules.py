"""The rules beyond Debugger as the registry and `sdlocal rules` see them, their parameters, and a
trial without training records (nothing judged, said in the log). Their verdicts on real trainings:
tests/detection/test_realworld.py, tests/launcher/e2e/test_replica_divergence_e2e.py."""
from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
from torch import nn

from sdlocal.evaluator.api import evaluate_trial
from sdlocal.evaluator.errors import RuleParameterError
from sdlocal.evaluator.registry import (
    builtin_rule_infos,
    default_collections,
    get_rule_class,
    instantiate_rule,
)
from sdlocal.hook.config import HookConfig
from sdlocal.hook.pytorch import Hook
from sdlocal.trial import create_trial

NEW_RULES = ["EvaluationMisuse", "FrozenParametersChanged", "GradientsNotReset", "ParametersNotTraining",
             "RepeatedBatches", "ReplicaDivergence"]


def test_listed_with_their_records_collection() -> None:
    listed = sorted(i.name for i in builtin_rule_infos() if i.group == "beyond Debugger")
    assert listed == NEW_RULES
    for name in NEW_RULES:
        [coll] = default_collections(name)
        assert coll.name == "sdlocal_records" and coll.parameter_map == {"save_interval": "5"}


def _trial(tmp_path: Path, records: bool) -> Path:
    colls = [{"CollectionName": "losses"}] + ([{"CollectionName": "sdlocal_records"}] if records else [])
    hook = Hook(HookConfig.from_dict({"HookParameters": {"save_interval": "1"}, "CollectionConfigurations": colls}),
                out_dir=tmp_path / "t")
    model, crit = nn.Linear(4, 2), nn.CrossEntropyLoss()
    hook.register_module(model)
    hook.register_loss(crit)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(4):
        opt.zero_grad()
        crit(model(torch.randn(8, 4)), torch.randint(0, 2, (8,))).backward()
        opt.step()
    hook.close()
    return tmp_path / "t"


@pytest.mark.parametrize(("rule", "params", "culprit"), [
    ("ReplicaDivergence", {"tolerance": "-1"}, "tolerance"),
    ("FrozenParametersChanged", {"frozen_regex": "(["}, "frozen_regex"),
    ("GradientsNotReset", {"max_stale_fraction": "2"}, "max_stale_fraction"),
    ("RepeatedBatches", {"min_repeats": "zero"}, "min_repeats"),
])
def test_bad_parameters_name_themselves(tmp_path: Path, rule: str, params: dict[str, str], culprit: str) -> None:
    trial = create_trial(str(_trial(tmp_path, records=False)))
    with pytest.raises(RuleParameterError, match=culprit):
        instantiate_rule(get_rule_class(rule), trial, params)


def test_no_records_judges_nothing_and_says_so(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    trial = _trial(tmp_path, records=False)
    with caplog.at_level(logging.WARNING):
        status = evaluate_trial(str(trial), "GradientsNotReset", {}, interval=0.0)
    # no verdict without data (evaluator/unjudged.py): an Error that says what it never saw
    assert status.status.value == "Error"
    assert "judged nothing: the trial has no training records" in status.status_details
    assert "no training records" in caplog.text


def test_healthy_records_fire_nothing(tmp_path: Path) -> None:
    trial = _trial(tmp_path, records=True)
    for rule in NEW_RULES:
        assert evaluate_trial(str(trial), rule, {}, interval=0.0).status.value == "NoIssuesFound", rule
