"""Files a trial's reader must not trust (trial/trial.py, _index.py, storage/_handles.py): a FIFO or
a device where an index or events file should be, an oversized index, an events file named outside
the trial. Each is an error naming the file, at once; through `sdlocal evaluate` one line, exit 1."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sdlocal.trial import create_trial
from sdlocal.trial.errors import CorruptRecordError, StorageError
from tests.evaluator._trials import train_steps, write_steps


def healthy(root: Path) -> Path:
    return write_steps(root, train_steps([{"w": np.ones(4, np.float32)}, {"w": np.zeros(4, np.float32)}]))


def index_file(root: Path, step: int = 1) -> Path:
    return next((root / "index").rglob(f"{step:012d}_*.json"))


def test_a_fifo_index_file_is_refused_not_waited_on(tmp_path: Path) -> None:
    root = healthy(tmp_path / "t")
    index = index_file(root)
    index.unlink()
    os.mkfifo(index)
    with pytest.raises(StorageError, match=r"cannot read .*000000000001_.*\.json: not a regular file"):
        create_trial(str(root)).steps()


def test_a_device_as_events_file_is_refused(tmp_path: Path) -> None:
    root = healthy(tmp_path / "t")
    events = next((root / "events").rglob("000000000001_*.tfevents"))
    events.unlink()
    events.symlink_to("/dev/zero")
    trial = create_trial(str(root))
    with pytest.raises(StorageError, match="not a regular file"):
        trial.tensor("w").value(1)
    assert float(trial.tensor("w").value(0).sum()) == 4.0  # the other steps read as before


def test_an_oversized_index_file_is_refused_without_reading_it_all(tmp_path: Path) -> None:
    root = healthy(tmp_path / "t")
    index = index_file(root)
    doc = json.loads(index.read_text())
    doc["padding"] = "x" * (33 << 20)
    index.write_text(json.dumps(doc))
    with pytest.raises(CorruptRecordError, match=r"000000000001_.*\.json: over 33,554,432 bytes: .*; refused"):
        create_trial(str(root)).steps()


@pytest.mark.parametrize("name", ["../../../../etc/passwd", "/etc/passwd", "events/../../secret.tfevents"])
def test_an_events_file_named_outside_the_trial_is_refused(tmp_path: Path, name: str) -> None:
    root = healthy(tmp_path / "t")
    index = index_file(root)
    doc = json.loads(index.read_text())
    doc["meta"]["event_file_name"] = name
    index.write_text(json.dumps(doc))
    with pytest.raises(CorruptRecordError, match=r"event file name .* is not a path inside the trial; refused"):
        create_trial(str(root)).steps()


def test_deeply_nested_index_json_is_a_malformed_index(tmp_path: Path) -> None:
    root = healthy(tmp_path / "t")
    index_file(root).write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(CorruptRecordError, match="malformed index file"):
        create_trial(str(root)).steps()


def test_sdlocal_evaluate_on_a_fifo_index_fails_in_one_line(tmp_path: Path) -> None:
    root = healthy(tmp_path / "t")
    index = index_file(root)
    index.unlink()
    os.mkfifo(index)
    env = {**os.environ, "SDLOCAL_HOME": str(tmp_path / "home")}
    done = subprocess.run([sys.executable, "-m", "sdlocal", "evaluate", str(root), "--rule", "AllZero"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and "not a regular file" in errors[0] and str(index.name) in errors[0], done.stderr
