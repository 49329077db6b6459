"""Interop: a trial written by our TrialWriter opened by the real smdebug 1.0.34 reader."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from sdlocal.trial import Collection, ModeKeys, SaveConfigMode, TrialWriter, create_trial

SMDEBUG_DUMP = r"""
import json, sys
import numpy as np
from smdebug.trials import create_trial
from smdebug.core.modes import ModeKeys

tr = create_trial(sys.argv[1])
out = {
    "tensor_names": tr.tensor_names(),
    "weights": tr.tensor_names(collection="weights"),
    "gradients": tr.tensor_names(collection="gradients"),
    "losses": tr.tensor_names(collection="losses"),
    "steps": tr.steps(),
    "train_steps": tr.steps(mode=ModeKeys.TRAIN),
    "eval_steps": tr.steps(mode=ModeKeys.EVAL),
    "workers": tr.workers(),
    "num_workers": tr.num_workers,
    "mean_reduction": float(tr.tensor("Net_fc.weight").reduction_value(0, "mean")),
    "keys": [],
}
arrays = {}
for name in tr.tensor_names():
    t = tr.tensor(name)
    for step in t.steps():
        try:
            v = t.value(step)
        except Exception:
            continue
        key = f"v{len(arrays)}"
        arrays[key] = np.asarray(v)
        out["keys"].append([name, step, key])
np.savez(sys.argv[2] + ".npz", **arrays)
with open(sys.argv[2] + ".json", "w") as f:
    json.dump(out, f)
"""


def write_trial(root: Path) -> None:
    rng = np.random.default_rng(1)
    every = {m: SaveConfigMode(save_interval=1) for m in ("TRAIN", "EVAL", "PREDICT", "GLOBAL")}
    w = TrialWriter(root)
    w.write_collections(
        [
            Collection("weights", include_regex=("^(?!gradient).*weight",), save_config=every),
            Collection("gradients", include_regex=("^gradient",), save_config=every),
            Collection("losses", include_regex=("[Ll]oss_(?!input).*output",), save_config=every),
        ]
    )
    step = 0
    mode_steps = {ModeKeys.TRAIN: 0, ModeKeys.EVAL: 0}
    for mode, n in ((ModeKeys.TRAIN, 4), (ModeKeys.EVAL, 2), (ModeKeys.TRAIN, 2)):
        for _ in range(n):
            mode_step = mode_steps[mode]
            mode_steps[mode] += 1
            tensors: list[tuple[str, object]] = [
                ("Net_fc.weight", rng.standard_normal((3, 4)).astype(np.float32)),
                ("Net_fc.bias", rng.standard_normal(3)),  # float64
                ("CrossEntropyLoss_output_0", np.float32(rng.random())),
                ("half", rng.standard_normal(5).astype(np.float16)),
                ("counts", np.arange(step, step + 3, dtype=np.int64)),
                ("ids", np.arange(4, dtype=np.int32)),
                ("pixels", np.arange(3, dtype=np.uint8)),
                ("mask", np.array([True, False])),
                ("smdebug/reductions/max/Net_fc.weight", np.float32(99.0)),
            ]
            if mode == ModeKeys.TRAIN:
                tensors.append(("gradient/Net_fc.weight", rng.standard_normal((3, 4)).astype(np.float32)))
            w.write_step(step, mode, mode_step, tensors)
            step += 1
    w.write_end_marker()


@pytest.mark.interop
def test_smdebug_reads_our_trial(tmp_path: Path, smdebug_python: Path) -> None:
    root = tmp_path / "trial"
    write_trial(root)
    script = tmp_path / "dump.py"
    script.write_text(SMDEBUG_DUMP)
    res = subprocess.run(
        [str(smdebug_python), str(script), str(root), str(tmp_path / "dump")],
        capture_output=True, text=True, timeout=300,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    theirs = json.loads((tmp_path / "dump.json").read_text())
    arrays = np.load(tmp_path / "dump.npz")

    ours = create_trial(root)
    assert theirs["tensor_names"] == ours.tensor_names()
    assert theirs["weights"] == ours.tensor_names(collection="weights") == ["Net_fc.weight"]
    assert theirs["gradients"] == ours.tensor_names(collection="gradients") == ["gradient/Net_fc.weight"]
    assert theirs["losses"] == ours.tensor_names(collection="losses") == ["CrossEntropyLoss_output_0"]
    assert theirs["steps"] == ours.steps() == list(range(8))
    assert theirs["train_steps"] == ours.steps(ModeKeys.TRAIN) == list(range(6))
    assert theirs["eval_steps"] == ours.steps(ModeKeys.EVAL) == [0, 1]
    assert theirs["workers"] == ours.workers() and theirs["num_workers"] == ours.num_workers == 1
    assert theirs["mean_reduction"] == pytest.approx(float(ours.tensor("Net_fc.weight").reduction_value(0, "mean")))
    assert ours.tensor("Net_fc.weight").reduction_value(0, "max") == 99.0
    seen = 0
    for name, step, key in theirs["keys"]:
        mine = ours.tensor(name).value(step)
        np.testing.assert_array_equal(arrays[key], mine)
        seen += 1
    assert seen == sum(len(ours.tensor(n).steps()) for n in ours.tensor_names())
