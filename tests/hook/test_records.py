"""The hook's training records (hook/records.py, sdlocal.trial.records): written only when the
records collection is configured, read back by the rules' reader, and invisible to smdebug's own
reader (the real smdebug 1.0.34 still opens the trial and reads the same steps and values)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import torch
from torch import nn

from sdlocal.evaluator.api import evaluate_trial
from sdlocal.hook.config import HookConfig
from sdlocal.hook.pytorch import Hook
from sdlocal.trial import create_trial
from sdlocal.trial.records import RecordReader


def _train(out: Path, records: bool, steps: int = 6) -> None:
    torch.manual_seed(0)
    colls = [{"CollectionName": "losses"}] + ([{"CollectionName": "sdlocal_records"}] if records else [])
    hook = Hook(HookConfig.from_dict({"HookParameters": {"save_interval": "2"}, "CollectionConfigurations": colls}),
                out_dir=out)
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 2))
    model[0].weight.requires_grad = False
    crit = nn.CrossEntropyLoss()
    hook.register_module(model)
    hook.register_loss(crit)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    x, y = torch.randn(16, 4), torch.randint(0, 2, (16,))
    for _ in range(steps):
        crit(model(x), y).backward()  # no zero_grad: the records see it
        opt.step()
    hook.close()


def test_records_only_with_their_collection(tmp_path: Path) -> None:
    _train(tmp_path / "off", records=False)
    assert not (tmp_path / "off" / "records").exists()
    _train(tmp_path / "on", records=True)
    lines = RecordReader(create_trial(str(tmp_path / "on")).storage).poll()
    assert {w for w, _ in lines} == {"worker_0"}
    layouts = [line for _, line in lines if line["kind"] == "layout"]
    steps = [line for _, line in lines if line["kind"] == "step"]
    assert [s["step"] for s in steps] == [0, 2, 4]  # the collection's schedule (save_interval 2)
    assert layouts[-1]["frozen"] == ["0.weight"] and layouts[-1]["held"] == ["0.bias", "1.weight", "1.bias",
                                                                            "2.weight", "2.bias"]
    assert layouts[-1]["buffers"] == ["1.running_mean", "1.running_var"]
    assert all(len(s["param_norms"]) == 6 for s in steps)
    assert steps[0]["param_norms"][0] == steps[-1]["param_norms"][0]  # the frozen weight
    assert steps[0]["param_norms"][2] != steps[-1]["param_norms"][2]
    final = lines[-1][1]
    assert final["kind"] == "final" and final["optimizer_steps"] == 6
    assert final["stale_gradients"][1] == final["stale_gradients"][0] > 0  # never zeroed
    batches = [b for s in steps for b in s["batches"]] + final["batches"]
    assert [b[0] for b in batches] == list(range(6)) and len({b[1] for b in batches}) == 1  # one batch


SMDEBUG_READ = """
import json, sys
from smdebug.trials import create_trial
t = create_trial(sys.argv[1])
loss = t.tensor("CrossEntropyLoss_output_0")
print(json.dumps({"steps": t.steps(), "workers": sorted(t.workers()), "names": t.tensor_names(),
                  "collections": sorted(t.collections()),
                  "loss": {str(s): float(loss.value(s)) for s in loss.steps()}}))
"""


def test_smdebug_opens_a_trial_with_records(tmp_path: Path, smdebug_python: Path) -> None:
    _train(tmp_path / "t", records=True)
    assert list((tmp_path / "t" / "records" / "worker_0").glob("*.jsonl"))
    proc = subprocess.run([str(smdebug_python), "-c", SMDEBUG_READ, str(tmp_path / "t")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    theirs = json.loads(proc.stdout.strip().splitlines()[-1])
    ours = create_trial(str(tmp_path / "t"))
    loss = ours.tensor("CrossEntropyLoss_output_0")
    assert theirs["steps"] == ours.steps() == [0, 2, 4]
    assert theirs["workers"] == ["worker_0"] and theirs["names"] == ["CrossEntropyLoss_output_0"]
    assert "sdlocal_records" in theirs["collections"]
    assert theirs["loss"] == {str(s): float(loss.value(s)) for s in loss.steps()}


class _Keywords(nn.Module):
    """A model called with keywords only, as the Hugging Face Trainer calls one (`model(**batch)`)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 2)

    def forward(self, features: object = None) -> torch.Tensor:
        x = features if isinstance(features, torch.Tensor) else torch.as_tensor(features, dtype=torch.float32)
        return self.lin(x)


def _train_keywords(out: Path, as_numpy: bool) -> None:
    hook = Hook(HookConfig.from_dict({"HookParameters": {"save_interval": "1"},
                                      "CollectionConfigurations": [{"CollectionName": "sdlocal_records"}]}),
                out_dir=out)
    model = _Keywords()
    hook.register_module(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for i in range(5):
        x = torch.full((8, 4), float(i))
        opt.zero_grad()
        model(features=x.numpy() if as_numpy else x).sum().backward()
        opt.step()
    hook.close()


def test_batches_passed_by_keyword_are_fingerprinted(tmp_path: Path) -> None:
    _train_keywords(tmp_path / "t", as_numpy=False)
    lines = RecordReader(create_trial(str(tmp_path / "t")).storage).poll()
    batches = [b for _, line in lines for b in line.get("batches", [])]
    assert [b[0] for b in batches] == list(range(5)) and len({b[1] for b in batches}) == 5
    assert [b[2] for b in batches] == [[], [1], [2], [3], [4]]  # the optimizer's steps before each batch
    assert evaluate_trial(str(tmp_path / "t"), "RepeatedBatches", {}, interval=0.0).status.value == "NoIssuesFound"


def test_no_fingerprint_judges_nothing(tmp_path: Path) -> None:
    # inputs that are not tensors (as inputs on a GPU, which are not read back): RepeatedBatches
    # judged nothing and says so, rather than NoIssuesFound
    _train_keywords(tmp_path / "t", as_numpy=True)
    lines = RecordReader(create_trial(str(tmp_path / "t")).storage).poll()
    assert lines and not [b for _, line in lines for b in line.get("batches", [])]
    status = evaluate_trial(str(tmp_path / "t"), "RepeatedBatches", {}, interval=0.0)
    assert status.status.value == "Error" and "no batch fingerprint" in status.status_details
