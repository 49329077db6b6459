"""TensorBoard event files written by the hooks, read back with TensorBoard's own reader
(EventAccumulator): scalars for losses, histograms for weights and gradients at save steps."""
from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torch import nn

from sdlocal.hook import _tensorboard
from sdlocal.hook._tensorboard import TensorBoardWriter, histogram_proto
from sdlocal.hook.config import HookConfig
from sdlocal.hook.pytorch import Hook
from sdlocal.trial.tfrecord import masked_crc32c


def _accumulate(folder: Path) -> EventAccumulator:
    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0, "histograms": 0})
    acc.Reload()
    return acc


def test_writer_records_are_checksummed_and_read_by_tensorboard(tmp_path: Path) -> None:
    w = TensorBoardWriter(tmp_path, clock=lambda: 1700000000.0)
    w.add_scalar("loss", 0.5, 3)
    w.add_histogram("w", np.arange(100.0), 3)
    w.add_histogram("nan_only", np.array([np.nan]), 3)  # nothing finite: no event
    w.close()
    data = w.path.read_bytes()
    length = struct.unpack("<Q", data[:8])[0]
    assert struct.unpack("<I", data[8:12])[0] == masked_crc32c(data[:8])
    assert struct.unpack("<I", data[12 + length:16 + length])[0] == masked_crc32c(data[12:12 + length])
    acc = _accumulate(tmp_path)
    assert [(e.step, e.value) for e in acc.Scalars("loss")] == [(3, 0.5)]
    hist = acc.Histograms("w")[0].histogram_value
    assert (hist.min, hist.max, hist.num, hist.sum) == (0.0, 99.0, 100.0, 4950.0)
    assert sum(hist.bucket) == 100
    assert "nan_only" not in acc.Tags()["histograms"]


def test_constant_histogram_has_one_bucket() -> None:
    proto = histogram_proto(np.full(7, 2.0))
    assert proto is not None and list(proto.bucket) == [7.0] and proto.bucket_limit[0] > 2.0


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


def _train(hook: Hook, steps: int) -> None:
    torch.manual_seed(0)
    model, loss_fn = _Net(), nn.CrossEntropyLoss()
    hook.register_module(model)
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    x, y = torch.randn(16, 4), torch.randint(0, 2, (16,))
    for _ in range(steps):
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    hook.close()


def test_pytorch_hook_exports_losses_weights_and_gradients(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_tensorboard.TENSORBOARD_CONFIG_ENV, str(tmp_path / "none.json"))
    cfg = HookConfig.from_dict({
        "LocalPath": str(tmp_path / "t"),
        "HookParameters": {"save_interval": "2", "export_tensorboard": "true"},
        "CollectionConfigurations": [{"CollectionName": "weights"}, {"CollectionName": "gradients"}],
    })
    assert cfg.tensorboard_dir == str(tmp_path / "t" / "tensorboard")
    _train(Hook(cfg), 6)
    acc = _accumulate(tmp_path / "t" / "tensorboard")
    loss = acc.Scalars("train/CrossEntropyLoss_output_0")
    assert [e.step for e in loss] == [0, 2, 4]
    assert loss[-1].value < loss[0].value  # lr 0.5 on one batch: the loss goes down
    hists = acc.Tags()["histograms"]
    assert {"train/_Net_fc.weight", "train/gradient/_Net_fc.weight"} <= set(hists)
    assert [e.step for e in acc.Histograms("train/_Net_fc.weight")] == [0, 2, 4]
    assert acc.Histograms("train/_Net_fc.weight")[0].histogram_value.num == 8


def test_tensorboard_output_config_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tb_config = tmp_path / "tensorboardoutputconfig.json"
    tb_config.write_text(json.dumps({"LocalPath": str(tmp_path / "job-tb")}))
    monkeypatch.setenv(_tensorboard.TENSORBOARD_CONFIG_ENV, str(tb_config))
    _train(Hook(HookConfig.from_dict({"LocalPath": str(tmp_path / "t")})), 3)
    acc = _accumulate(tmp_path / "job-tb")
    assert len(acc.Scalars("train/CrossEntropyLoss_output_0")) == 1  # default save_interval 500: step 0


def test_no_tensorboard_without_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_tensorboard.TENSORBOARD_CONFIG_ENV, str(tmp_path / "none.json"))
    _train(Hook(HookConfig.from_dict({"LocalPath": str(tmp_path / "t")})), 3)
    assert not list(tmp_path.rglob("events.out.tfevents.*"))
    assert not (tmp_path / "t" / "tensorboard").exists()
