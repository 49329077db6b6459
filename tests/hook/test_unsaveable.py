"""Do no harm: tensors the hook cannot copy (sparse gradients, nested outputs, meta tensors) are
skipped with one line naming each, once; the rest of the step is saved and the training goes on."""
from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
from torch import nn

from sdlocal.hook import _unsaveable
from sdlocal.hook.config import HookConfig
from sdlocal.hook.pytorch import Hook
from sdlocal.trial import create_trial


class SparseModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 4, sparse=True)
        self.head = nn.Linear(4, 2)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(ids).mean(1))


def test_sparse_gradients_and_nested_outputs_are_skipped_once(tmp_path: Path,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    _unsaveable._said.clear()
    caplog.set_level(logging.WARNING, logger="sdlocal.hook")
    hook = Hook(HookConfig.from_dict({
        "LocalPath": str(tmp_path), "HookParameters": {"save_interval": "1"},
        "CollectionConfigurations": [{"CollectionName": "gradients"}, {"CollectionName": "weights"}]}))
    model = SparseModel()
    hook.register_module(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)  # SGD takes sparse gradients
    for _ in range(3):
        loss = nn.functional.cross_entropy(model(torch.randint(0, 10, (8, 3))), torch.zeros(8, dtype=torch.long))
        opt.zero_grad()
        loss.backward()
        opt.step()
        hook.save_tensor("nested", torch.nested.nested_tensor([torch.ones(2), torch.ones(3)]), "weights")
        hook.save_tensor("meta", torch.empty(3, device="meta"), "weights")
    hook.close()
    said = [r.getMessage() for r in caplog.records if "not saved" in r.getMessage()]
    assert sorted(said) == sorted([
        "sdlocal hook: gradient/SparseModel_embed.weight is a sparse_coo tensor: not saved (the training goes on)",
        "sdlocal hook: nested is a nested tensor: not saved (the training goes on)",
        "sdlocal hook: meta is a meta tensor (no data): not saved (the training goes on)"])
    trial = create_trial(tmp_path)
    assert trial.tensor("gradient/SparseModel_head.weight").steps() == [0, 1, 2]
    assert trial.tensor("SparseModel_embed.weight").steps() == [0, 1, 2]
    assert not {"gradient/SparseModel_embed.weight", "nested", "meta"} & set(trial.tensor_names())
