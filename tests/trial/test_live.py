"""Following a trial while it is written: incremental refresh, multi-worker completeness, the end
marker, waiting for collections, and corrupt files."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sdlocal.trial import (
    Collection,
    CorruptRecordError,
    MissingCollectionFiles,
    ModeKeys,
    TrialWriter,
    create_trial,
)
from sdlocal.trial.proto import encode_event
from sdlocal.trial.storage import LocalStorage, S3Storage, Storage
from sdlocal.trial.tfrecord import encode_record
from sdlocal.trial.trial import Trial


class CountingStorage(LocalStorage):
    """A LocalStorage that records the calls the reader makes."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.calls: list[tuple[str, ...]] = []

    def read(self, key: str, start: int | None = None, length: int | None = None) -> bytes:
        self.calls.append(("read", key))
        return super().read(key, start, length)

    def list(self, prefix: str = "", start_after: str | None = None) -> list[str]:
        self.calls.append(("list", prefix, str(start_after)))
        return super().list(prefix, start_after)


def step(w: TrialWriter, s: int, mode: ModeKeys = ModeKeys.TRAIN, mode_step: int | None = None) -> None:
    w.write_step(s, mode, s if mode_step is None else mode_step, [("loss", np.float32(s)), ("w", np.full(3, s))])


def test_incremental_refresh_is_cheap(tmp_path: Path) -> None:
    w = TrialWriter(tmp_path)
    w.write_collections([Collection("losses", include_regex=("loss",))])
    storage = CountingStorage(tmp_path)
    tr = Trial(storage)
    tr.refresh()
    assert tr.steps() == [] and tr.last_complete_step == -1  # smdebug: -1 before any complete step
    for s in range(3):
        step(w, s)
    tr.refresh()
    assert tr.steps() == [0, 1, 2] and tr.last_complete_step == 2
    storage.calls.clear()
    tr.refresh()  # nothing new: one LIST after the last key, no GET
    assert storage.calls == [("list", "index/", "index/000000000/000000000002_worker_0.json")]
    step(w, 3)
    storage.calls.clear()
    tr.refresh()
    assert [c for c in storage.calls if c[0] == "read"] == [("read", "index/000000000/000000000003_worker_0.json")]
    assert tr.tensor("loss").value(3) == 3.0
    assert not tr.training_ended() and not tr.loaded_all_steps
    w.write_end_marker()
    tr.refresh()
    assert tr.training_ended() and tr.loaded_all_steps


def test_multi_worker_completeness(tmp_path: Path) -> None:
    w0, w1 = TrialWriter(tmp_path, "worker_0"), TrialWriter(tmp_path, "worker_1")
    w0.write_collections([Collection("c")], num_workers=2)
    for s in range(4):
        step(w0, s)
    tr = create_trial(tmp_path)
    assert tr.num_workers == 2
    assert tr.steps() == [] and tr.steps(show_incomplete_steps=True) == [0, 1, 2, 3]
    assert tr.last_complete_step == -1 and not tr.is_step_complete(0)
    step(w1, 0)
    step(w1, 2)  # worker_1 skipped step 1: step 1 is complete once worker_1 is past it
    tr.refresh()
    assert tr.workers() == ["worker_0", "worker_1"]
    assert tr.last_complete_step == 2 and tr.steps() == [0, 1, 2]
    assert tr.is_step_complete(1) and not tr.is_step_complete(3)
    assert tr.tensor("w").workers(0) == ["worker_0", "worker_1"]
    assert tr.tensor("w").workers(1) == ["worker_0"]
    assert tr.tensor("w").steps() == [0, 1, 2]
    step(w1, 3)
    tr.refresh()  # re-lists from step 3 and picks up worker_1's late file
    assert tr.last_complete_step == 3 and tr.tensor("w").workers(3) == ["worker_0", "worker_1"]
    step(w0, 4)
    w0.write_end_marker()
    tr.refresh()
    assert tr.loaded_all_steps and tr.steps() == [0, 1, 2, 3, 4] and tr.last_complete_step == 4


def test_live_refresh_on_s3(s3_client: Any, bucket: str) -> None:
    st: Storage = S3Storage(bucket, "job/debug-output", client=s3_client)
    st.write("collections/000000000/worker_0_collections.json", b'{"collections": {}, "_meta": {"num_workers": 1}}')
    tr = Trial(st)
    tr.refresh()
    for s in range(3):
        rec = encode_record(encode_event("loss", np.float32(s), s, ModeKeys.TRAIN, s))
        st.write(f"events/{s:012d}/{s:012d}_worker_0.tfevents", rec)
        index = {
            "meta": {"mode": "TRAIN", "mode_step": s, "event_file_name": f"events/{s:012d}/{s:012d}_worker_0.tfevents"},
            "tensor_payload": [{"tensorname": "loss", "start_idx": 0, "length": len(rec)}],
            "shape_payload": [],
        }
        st.write(f"index/000000000/{s:012d}_worker_0.json", json.dumps(index).encode())
        tr.refresh()
        assert tr.steps() == list(range(s + 1))
        assert tr.tensor("loss").value(s) == float(s)
    st.write("training_job_end.ts", b"")
    tr.refresh()
    assert tr.loaded_all_steps


def test_wait_for_collections(tmp_path: Path) -> None:
    tr = create_trial(tmp_path)
    clock = [0.0]
    sleeps: list[float] = []

    def sleep(s: float) -> None:
        sleeps.append(s)
        clock[0] += s
        if len(sleeps) == 3:
            TrialWriter(tmp_path).write_collections([Collection("weights", include_regex=("weight",))])

    tr.wait_for_collections(timeout=60, interval=2, sleep=sleep, clock=lambda: clock[0])
    assert sleeps == [2, 2, 2] and list(tr.collections()) == ["weights"]

    ended = create_trial(tmp_path / "other")
    TrialWriter(tmp_path / "other").write_end_marker()
    with pytest.raises(MissingCollectionFiles, match="Training job has ended. All the collection files could not be loaded"):
        ended.wait_for_collections(timeout=60, interval=2, sleep=sleep, clock=lambda: clock[0])

    never = create_trial(tmp_path / "never")
    with pytest.raises(MissingCollectionFiles, match="within 5s"):
        never.wait_for_collections(timeout=5, interval=2, sleep=sleep, clock=lambda: clock[0])


def test_corrupt_record_names_file_and_offset(tmp_path: Path) -> None:
    w = TrialWriter(tmp_path)
    w.write_step(0, ModeKeys.TRAIN, 0, [("a", np.ones(4)), ("b", np.zeros(4))])
    ev = tmp_path / "events/000000000000/000000000000_worker_0.tfevents"
    data = bytearray(ev.read_bytes())
    tr = create_trial(tmp_path)
    b_start = len(data) // 2
    data[b_start + 2] ^= 0xFF  # the length of record "b"
    ev.write_bytes(bytes(data))
    np.testing.assert_array_equal(tr.tensor("a").value(0), np.ones(4))
    with pytest.raises(CorruptRecordError, match=rf"000000000000_worker_0\.tfevents at offset {b_start}.*CRC"):
        tr.tensor("b").value(0)
    ev.write_bytes(bytes(data[: b_start + 20]))
    with pytest.raises(CorruptRecordError, match=rf"at offset {b_start}: truncated"):
        tr.tensor("b").value(0)


def test_malformed_index_names_the_key(tmp_path: Path) -> None:
    w = TrialWriter(tmp_path)
    w.write_step(0, ModeKeys.TRAIN, 0, [("a", np.ones(4))])
    (tmp_path / "index/000000000/000000000001_worker_0.json").write_text('{"meta": ')
    with pytest.raises(CorruptRecordError, match=r"index/000000000/000000000001_worker_0\.json.*malformed"):
        create_trial(tmp_path)


def test_mode_not_seen_yet_is_empty_on_a_live_trial(tmp_path: Path) -> None:
    """The real-time notebooks poll `sdlocal.trial.steps(mode=modes.EVAL)` while only TRAIN steps are saved
    (issue 21 item 4): smdebug answers [] until the first EVAL step; so do tensor_names and friends."""
    w = TrialWriter(tmp_path)
    w.write_collections([Collection("losses", include_regex=("loss",))])
    for s in range(3):
        step(w, s)
    tr = create_trial(str(tmp_path))
    assert not tr.loaded_all_steps and tr.last_complete_step == 2  # live: no end marker yet
    assert tr.steps(mode=ModeKeys.EVAL) == []
    assert tr.steps(ModeKeys.EVAL, show_incomplete_steps=True) == []
    assert tr.tensor_names(mode=ModeKeys.EVAL) == []
    assert tr.tensor_names(step=0, mode=ModeKeys.EVAL) == []
    assert tr.tensor("loss").steps(mode=ModeKeys.EVAL) == []
    assert tr.global_step(ModeKeys.EVAL, 0) is None
    assert tr.has_passed_step(0, ModeKeys.EVAL).name == "NOT_YET_AVAILABLE"
    assert tr.steps(mode=ModeKeys.TRAIN) == [0, 1, 2]
    # the first EVAL step arrives: it shows up, numbered in its own mode
    step(w, 3, ModeKeys.EVAL, 0)
    step(w, 4)
    tr.refresh()
    assert tr.steps(mode=ModeKeys.EVAL) == [0]
    assert tr.tensor_names(mode=ModeKeys.EVAL) == ["loss", "w"]
    assert tr.tensor("loss").value(0, mode=ModeKeys.EVAL) == 3.0
