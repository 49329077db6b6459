"""The write side: records, events, collections and TrialWriter files, checked byte for byte
against trials written by the real smdebug hook."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sdlocal.trial import Collection, CollectionsFile, CorruptRecordError, ModeKeys, TrialWriter, create_trial
from sdlocal.trial.proto import decode_event, encode_event
from sdlocal.trial.tfrecord import FOOTER, decode_record, encode_record, iter_records, masked_crc32c

DTYPES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "bool", "complex128"]


def test_footer_is_smdebug_constant() -> None:
    assert FOOTER == bytes.fromhex("b3c02d06")
    assert masked_crc32c(b"0x12345678") == 0x062DC0B3


def test_record_roundtrip_and_corruption() -> None:
    rec = encode_record(b"hello")
    assert len(rec) == 12 + 5 + 4
    assert bytes(decode_record(rec)) == b"hello"
    bad_len = bytes([rec[0] ^ 1]) + rec[1:]
    with pytest.raises(CorruptRecordError, match="f.tfevents at offset 40.*length CRC"):
        decode_record(bad_len, where="f.tfevents", offset=40)
    with pytest.raises(CorruptRecordError, match="footer"):
        decode_record(rec[:-1] + b"\x00")
    with pytest.raises(CorruptRecordError, match="truncated"):
        list(iter_records(rec + rec[:-3], where="x"))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 3, 4)])
def test_event_roundtrip(dtype: str, shape: tuple[int, ...]) -> None:
    value = (np.arange(int(np.prod(shape))) % 7).astype(dtype).reshape(shape)
    d = decode_event(encode_event("a/b", value, 12, ModeKeys.EVAL, 3))
    assert (d.name, d.step, d.mode, d.mode_step) == ("a/b", 12, ModeKeys.EVAL, 3)
    assert d.value.dtype == value.dtype and d.value.shape == value.shape
    np.testing.assert_array_equal(d.value, value)


def test_strings_and_bf16() -> None:
    d = decode_event(encode_event("s", np.array(["a", "héllo"]), 0, ModeKeys.TRAIN, 0))
    assert d.value.tolist() == ["a", "héllo"]
    import torch
    bf = torch.tensor([1.5, -2.0], dtype=torch.bfloat16).float().numpy()
    d = decode_event(encode_event("b", bf, 0, ModeKeys.TRAIN, 0))
    assert d.value.dtype == np.float32 and d.value.tolist() == [1.5, -2.0]


def test_reencoding_smdebug_events_is_byte_identical(fixture_trials: Path) -> None:
    for f in sorted((fixture_trials / "healthy_eval" / "events").rglob("*.tfevents"))[:15]:
        buf = f.read_bytes()
        for _, payload in iter_records(buf, where=str(f)):
            d = decode_event(payload)
            assert encode_event(d.name, d.value, d.step, d.mode, d.mode_step, d.wall_time) == bytes(payload)


def test_collections_file_roundtrip(fixture_trials: Path) -> None:
    text = (fixture_trials / "healthy" / "collections" / "000000000" / "worker_0_collections.json").read_text()
    cf = CollectionsFile.from_json(text)
    assert json.loads(cf.to_json()) == json.loads(text)
    assert cf.collections["weights"].matches("Sequential_fc0.weight")
    assert not cf.collections["weights"].matches("gradient/Sequential_fc0.weight")


def test_writer_layout_and_index(tmp_path: Path) -> None:
    w = TrialWriter(tmp_path, worker="worker_1")
    tensors = [("w", np.ones((4, 4), np.float32)), ("loss", np.float32(0.5))]
    w.write_step(1007, ModeKeys.EVAL, 3, tensors)
    w.write_collections([Collection("weights", include_regex=("w",))], num_workers=2)
    w.write_end_marker()
    idx = json.loads((tmp_path / "index/000000001/000000001007_worker_1.json").read_text())
    assert list(idx) == ["meta", "tensor_payload", "shape_payload"]
    assert idx["meta"] == {
        "mode": "EVAL",
        "mode_step": 3,
        "event_file_name": "events/000000001007/000000001007_worker_1.tfevents",
    }
    buf = (tmp_path / idx["meta"]["event_file_name"]).read_bytes()
    for entry, (name, value) in zip(idx["tensor_payload"], tensors, strict=True):
        chunk = buf[entry["start_idx"] : entry["start_idx"] + entry["length"]]
        d = decode_event(decode_record(chunk))
        assert d.name == entry["tensorname"] == name
        np.testing.assert_array_equal(d.value, value)
    assert sum(e["length"] for e in idx["tensor_payload"]) == len(buf)
    coll = json.loads((tmp_path / "collections/000000000/worker_1_collections.json").read_text())
    assert list(coll) == ["collections", "_meta"] and coll["_meta"] == {"num_workers": 2}
    assert (tmp_path / "training_job_end.ts").read_bytes() == b""
    assert not list(tmp_path.rglob("*.tmp"))


@pytest.mark.parametrize("dtype", DTYPES + ["str"])
@pytest.mark.parametrize("shape", [(), (0,), (1,), (2, 0, 3), (3, 4)])
def test_hand_encoded_tensor_matches_protobuf(dtype: str, shape: tuple[int, ...]) -> None:
    """The fast path builds TensorProto bytes by hand: they must equal protobuf's own."""
    from sdlocal.trial.proto import _tensor_parts, make_tensor_proto

    value = np.ones(shape, dtype=dtype)
    expected = make_tensor_proto("t/x", value).SerializeToString()
    assert b"".join(_tensor_parts("t/x", value)) == expected


def test_a_step_file_is_whole_through_short_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The step's parts go out in writev calls; a call that writes only part of them (a signal, a
    nearly full disk) is followed by the rest, from the byte where it stopped."""
    import os

    from sdlocal.trial import writer as writer_module

    values = [("a", np.arange(3000, dtype=np.float32).reshape(30, 100)), ("b", np.float64(2.5)),
              ("c", np.ones((7, 9), dtype=np.int64))]
    TrialWriter(tmp_path / "whole").write_step(4, ModeKeys.TRAIN, 4, values, wall_time=1.5)
    real_writev = os.writev
    calls = []

    def short_writev(fd: int, buffers: list[Any]) -> int:
        calls.append(len(buffers))
        first = memoryview(buffers[0]).cast("B")
        return real_writev(fd, [first[:max(1, len(first) // 3)]])  # a third of the first part at most

    monkeypatch.setattr(writer_module.os, "writev", short_writev)
    TrialWriter(tmp_path / "short").write_step(4, ModeKeys.TRAIN, 4, values, wall_time=1.5)
    monkeypatch.undo()
    key = "events/000000000004/000000000004_worker_0.tfevents"
    assert (tmp_path / "short" / key).read_bytes() == (tmp_path / "whole" / key).read_bytes()
    assert len(calls) > 10
    trial = create_trial(str(tmp_path / "short"))
    np.testing.assert_array_equal(trial.tensor("a").value(4), values[0][1])


def test_large_step_files_are_dropped_behind_and_read_back_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With SDLOCAL_DROP_BEHIND=1, each step file of DROP_BEHIND_BYTES or more has its write-back
    started once written and its cached pages dropped DROP_BEHIND_LAG steps later (posix_fadvise
    DONTNEED); small files, a writer made with drop_behind=False and one without the variable are
    left alone. Every value reads back."""
    from sdlocal.trial import writer as writer_module

    advised: list[str] = []
    real = writer_module._FADVISE
    assert real is not None  # Linux

    def spy(fd: int, offset: int, length: int, advice: int) -> None:
        assert advice == writer_module.os.POSIX_FADV_DONTNEED
        advised.append(writer_module.os.readlink(f"/proc/self/fd/{fd}"))
        real(fd, offset, length, advice)

    monkeypatch.setattr(writer_module, "_FADVISE", spy)
    monkeypatch.setenv("SDLOCAL_DIRECT_WRITES", "0")  # direct writes (on a disk) leave no page cache to drop
    big = np.arange(300_000, dtype=np.float32)  # 1.2 MB
    monkeypatch.setenv(writer_module.DROP_BEHIND_ENV, "1")
    w = TrialWriter(tmp_path / "t")
    for step in range(7):
        w.write_step(step, ModeKeys.TRAIN, step, [("big", big + step), ("small", np.float32(step))])
    w.write_step(7, ModeKeys.TRAIN, 7, [("small", np.float32(7))])  # a small file: not advised
    names = [Path(p).name for p in advised]
    files = [f"{s:012d}_worker_0.tfevents" for s in range(7)]
    # at once (as the .tmp file, before its rename), then 4 steps later by name
    assert names == [x for s in range(7) for x in
                     [files[s] + ".tmp"] + ([files[s - writer_module.DROP_BEHIND_LAG]] if s >= 4 else [])]
    trial = create_trial(str(tmp_path / "t"))
    for step in range(7):
        np.testing.assert_array_equal(trial.tensor("big").value(step), big + step)
    advised.clear()
    TrialWriter(tmp_path / "u", drop_behind=False).write_step(0, ModeKeys.TRAIN, 0, [("big", big)])
    monkeypatch.delenv(writer_module.DROP_BEHIND_ENV)
    TrialWriter(tmp_path / "v").write_step(0, ModeKeys.TRAIN, 0, [("big", big)])  # off by default
    assert advised == []
