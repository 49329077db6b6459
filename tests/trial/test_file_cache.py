"""Small events files read whole once they are read from twice (trial/_file_cache.py): the same
values, independent of each other and of the kept bytes, fewer reads, and the limits kept."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import numpy as np
import pytest

from sdlocal.trial import ModeKeys, TrialWriter, _file_cache, create_trial
from sdlocal.trial.errors import CorruptRecordError

NAMES = [f"layer{i}.weight" for i in range(8)] + ["loss"]


def _write(root: Any, steps: int = 4, rows: int = 16) -> dict[tuple[str, int], np.ndarray]:
    rng = np.random.default_rng(0)
    written = {}
    w = TrialWriter(root)
    for step in range(steps):
        tensors = [(name, rng.standard_normal((rows, 8)).astype(np.float32) if name != "loss"
                    else np.float32(rng.random())) for name in NAMES]
        w.write_step(step, ModeKeys.TRAIN, step, tensors)
        written.update({(name, step): np.asarray(value) for name, value in tensors})
    w.write_end_marker()
    return written


class CountingReads:
    """Wraps a trial's storage: every read_range call, by key and length."""

    def __init__(self, trial: Any) -> None:
        self.inner = trial.storage
        self.reads: list[tuple[str, int, int]] = []
        trial.storage = self

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def read_range(self, key: str, start: int, length: int, *args: Any) -> memoryview:
        self.reads.append((key, start, length))
        return self.inner.read_range(key, start, length, *args)


def test_values_are_the_written_ones_and_independent(tmp_path: Path) -> None:
    written = _write(tmp_path)
    trial = create_trial(tmp_path)
    for _ in range(2):  # the second pass is served from the kept files
        for name in NAMES:
            for step in trial.tensor(name).steps():
                np.testing.assert_array_equal(trial.tensor(name).value(step), written[(name, step)])
    assert trial._files.held > 0
    value = trial.tensor("layer3.weight").value(2)
    assert value.flags.writeable and value.flags.owndata
    value[:] = 7.0  # the caller's own memory: neither the kept file nor a later read changes
    np.testing.assert_array_equal(trial.tensor("layer3.weight").value(2), written[("layer3.weight", 2)])
    np.testing.assert_array_equal(trial.tensor("layer4.weight").value(2), written[("layer4.weight", 2)])


def test_a_step_file_is_read_whole_from_its_second_value_on(tmp_path: Path) -> None:
    _write(tmp_path, steps=1)
    trial = create_trial(tmp_path)
    reads = CountingReads(trial).reads
    for name in NAMES:
        trial.tensor(name).value(0)
    events = trial._index.file_ends
    (key, size), = events.items()
    # the first value alone, then the whole file once; the other seven values from memory
    assert [(k, s, n == size) for k, s, n in reads] == [(key, reads[0][1], False), (key, 0, True)]


def test_a_file_read_once_is_never_fetched_whole(tmp_path: Path) -> None:
    _write(tmp_path, steps=5)
    trial = create_trial(tmp_path)
    reads = CountingReads(trial).reads
    losses = [float(trial.tensor("loss").value(s)) for s in trial.tensor("loss").steps()]
    assert len(losses) == 5 and trial._files.held == 0
    assert all(length < 100 for _, _, length in reads)  # one record each, never a whole file


def test_large_files_are_read_record_by_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_file_cache, "MAX_FILE_BYTES", 4096)
    written = _write(tmp_path, steps=2, rows=64)  # 2 KiB per weight: step files of about 17 KiB
    trial = create_trial(tmp_path)
    reads = CountingReads(trial).reads
    for name in NAMES:
        np.testing.assert_array_equal(trial.tensor(name).value(1), written[(name, 1)])
    assert trial._files.held == 0 and len(reads) == len(NAMES)


def test_the_budget_is_kept_and_values_stay_right(tmp_path: Path) -> None:
    written = _write(tmp_path, steps=12)
    trial = create_trial(tmp_path)
    size = max(trial._index.file_ends.values())
    trial._files = _file_cache.FileCache(budget=3 * size)  # room for three of the twelve step files
    for _ in range(2):
        for name in NAMES:
            for step in range(12):
                np.testing.assert_array_equal(trial.tensor(name).value(step), written[(name, step)])
                assert trial._files.held <= 3 * size
    assert len(trial._files._files) == 3


def test_a_kept_file_with_a_damaged_record_is_read_again(tmp_path: Path) -> None:
    """A record that fails in a kept file says so (file and offset, as without the cache) and
    drops the file: once it is replaced by a sound one, the next read gets the value."""
    written = _write(tmp_path, steps=1)
    trial = create_trial(tmp_path)
    trial.tensor("layer0.weight").value(0)
    (key, _), = trial._index.file_ends.items()
    ev = tmp_path / key
    sound = ev.read_bytes()
    start = trial._index.tensors["layer5.weight"].locations[0]["worker_0"].start
    damaged = bytearray(sound)
    damaged[start + 2] ^= 0xFF  # the record's length
    ev.write_bytes(bytes(damaged))
    trial.tensor("layer1.weight").value(0)  # the file is kept now, damaged
    with pytest.raises(CorruptRecordError, match=rf"{key} at offset {start}.*CRC"):
        trial.tensor("layer5.weight").value(0)
    ev.write_bytes(sound)
    np.testing.assert_array_equal(trial.tensor("layer5.weight").value(0), written[("layer5.weight", 0)])


def test_on_s3_reading_every_tensor_makes_two_gets_per_step_file(tmp_path: Path, moto_server: str, bucket: str) -> None:
    """A real moto server: reading every tensor of every step costs two GETs per step file (its
    first value, then the file), where it cost one GET per value."""
    written = _write(tmp_path, steps=3)
    client = boto3.client("s3", endpoint_url=moto_server, region_name="us-east-1")
    for path in tmp_path.rglob("*"):
        if path.is_file():
            client.upload_file(str(path), bucket, f"jobs/j/debug-output/{path.relative_to(tmp_path).as_posix()}")
    gets: list[str] = []
    client.meta.events.register("before-parameter-build.s3.GetObject", lambda params, **_: gets.append(params["Key"]))
    trial = create_trial(f"s3://{bucket}/jobs/j/debug-output", s3_client=client)
    for step in trial.steps():
        for name in NAMES:
            np.testing.assert_array_equal(trial.tensor(name).value(step), written[(name, step)])
    event_gets = [k for k in gets if k.endswith(".tfevents")]
    assert len(event_gets) == 2 * 3, event_gets
