"""The reader's hot path (trial/_decode.py) against the general decoders: same values for every
record both writers produce, the lean walk really taken for them, the general path for the rest,
and corrupt records rejected with the general path's errors (file and offset named)."""
from __future__ import annotations

import hashlib
import json
import mmap
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tensorboard.compat.proto import tensor_pb2, tensor_shape_pb2

from sdlocal.trial import CorruptRecordError, ModeKeys, TrialWriter, create_trial
from sdlocal.trial._decode import HEADER_SIZE, _data_offset, _layout, record_value
from sdlocal.trial.proto import _field_bytes, _metadata_bytes, decode_event, encode_event
from sdlocal.trial.tfrecord import decode_record, encode_record, iter_records

DTYPES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
          "uint64", "bool", "complex64", "complex128"]


def general(record: bytes, where: str = "u/k", offset: int = 0) -> np.ndarray:
    return decode_event(decode_record(record, where=where, offset=offset), where=where, offset=offset).value


def framed(payload: bytes) -> memoryview:
    """A record as a ranged read hands it over: a writable buffer of the reader's own."""
    return memoryview(bytearray(encode_record(payload)))


def lean_taken(record: memoryview) -> bool:
    return _layout(record, HEADER_SIZE, len(record) - 4) is not None


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (1,), (5,), (2, 3, 4), (300, 2)])
def test_same_value_as_the_general_path(dtype: str, shape: tuple[int, ...]) -> None:
    value = (np.arange(int(np.prod(shape))) % 7).astype(dtype).reshape(shape)
    rec = framed(encode_event("a/long/tensor_name" * 8, value, 2**40, ModeKeys.EVAL, 300))
    got = record_value(rec, "u", "k", 0)
    assert lean_taken(rec)
    want = general(bytes(rec))
    assert got.dtype == want.dtype == value.dtype and got.shape == want.shape == shape
    np.testing.assert_array_equal(got, want)


def test_one_tensor_over_many_steps() -> None:
    """The steps of one tensor share their layout up to the data (what the lean walk keeps as a
    template); where they do not (other digits in the metadata, another shape under the same name,
    another dtype), each still decodes to its own value."""
    rng = np.random.default_rng(0)
    cases = [(step, rng.standard_normal((4, 5)).astype(np.float32)) for step in (0, 1, 9, 10, 99, 100, 10**6)]
    cases += [(7, rng.standard_normal((5, 4)).astype(np.float32)), (8, np.arange(20, dtype=np.int64).reshape(4, 5)),
              (11, rng.standard_normal((4, 5)).astype(np.float32))]
    for _ in range(2):
        for step, value in cases:
            rec = framed(encode_event("layer.weight", value, step, ModeKeys.TRAIN, step, wall_time=float(step)))
            got = record_value(rec, "u", "k", 0)
            assert lean_taken(rec) and got.dtype == value.dtype and got.shape == value.shape
            np.testing.assert_array_equal(got, value)


def test_records_the_lean_walk_leaves_to_the_general_path() -> None:
    cases = [
        np.zeros((0, 3), dtype=np.float32),  # empty: no tensor_content
        np.array(["a", "héllo"]),  # strings: string_val
    ]
    for value in cases:
        rec = framed(encode_event("t", value, 3, ModeKeys.TRAIN, 3))
        assert not lean_taken(rec)
        got = record_value(rec, "u", "k", 0)
        assert got.shape == value.shape and got.tolist() == value.tolist()
    # values in float_val (as TF writes scalars), not tensor_content
    shape = tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=3)])
    tp = tensor_pb2.TensorProto(dtype=1, tensor_shape=shape, float_val=[1.5, 2.5, 3.5])
    value_msg = _field_bytes(1, b"f") + _field_bytes(8, tp.SerializeToString()) + _metadata_bytes(1, 0)
    payload = _field_bytes(5, _field_bytes(1, value_msg))
    rec = framed(payload)
    assert not lean_taken(rec)
    assert record_value(rec, "u", "k", 0).tolist() == [1.5, 2.5, 3.5]
    # the same tensor_content record with the tensor fields in another order: the general path decodes it
    content = np.arange(3, dtype=np.float32)
    tp = tensor_pb2.TensorProto(dtype=1, tensor_shape=shape, tensor_content=content.tobytes())
    body = tp.SerializeToString()
    dims = _field_bytes(2, shape.SerializeToString())
    reordered = dims + b"\x08\x01" + _field_bytes(4, content.tobytes())
    assert len(reordered) == len(body)
    value_msg = _field_bytes(1, b"r") + _field_bytes(8, reordered)
    rec = framed(_field_bytes(5, _field_bytes(1, value_msg)))
    assert not lean_taken(rec)
    np.testing.assert_array_equal(record_value(rec, "u", "k", 0), content)


def test_values_are_writable_and_their_own_memory() -> None:
    value = np.arange(6, dtype=np.float32).reshape(2, 3)
    raw = encode_record(encode_event("w", value, 1, ModeKeys.TRAIN, 1))
    pristine = bytes(bytearray(raw))
    mine = record_value(memoryview(bytearray(raw)), "u", "k", 0)  # a buffer of the reader's: no copy
    shared = memoryview(raw)  # read-only bytes (an S3 body): copied
    a, b = record_value(shared, "u", "k", 0), record_value(shared, "u", "k", 0)
    for got in (mine, a):
        assert got.flags.writeable
        got[0, 0] = 99.0
    assert b[0, 0] == 0.0 and raw == pristine


def test_corrupt_framing_names_file_and_offset() -> None:
    rec = bytearray(encode_record(encode_event("t", np.ones(4, np.float32), 1, ModeKeys.TRAIN, 1)))
    bad_len = bytearray(rec)
    bad_len[2] ^= 0xFF
    with pytest.raises(CorruptRecordError, match=r"^s3://b/p/events/x\.tfevents at offset 1234: record length CRC"):
        record_value(memoryview(bad_len), "s3://b/p", "events/x.tfevents", 1234)
    bad_footer = bytearray(rec)
    bad_footer[-1] ^= 0x01
    with pytest.raises(CorruptRecordError, match="at offset 7: record footer is not smdebug's checksum constant"):
        record_value(memoryview(bad_footer), "u", "k", 7)
    with pytest.raises(CorruptRecordError, match="at offset 7: truncated record"):
        record_value(memoryview(rec[:-6]), "u", "k", 7)
    with pytest.raises(CorruptRecordError, match="at offset 7: record spans"):
        record_value(memoryview(rec + b"\x00"), "u", "k", 7)
    with pytest.raises(CorruptRecordError, match="at offset 7: truncated record header"):
        record_value(memoryview(rec[:5]), "u", "k", 7)


def _spans_the_value_does_not_use(payload: bytes) -> list[range]:
    """Where the tag's text and the metadata lie in an Event we encoded (the lean walk skips them)."""
    tag_at = payload.index(b"\x0a\x0bparam/w_b.x") + 2
    meta_at = payload.rindex(b"\x4a")
    return [range(tag_at, tag_at + 11), range(meta_at, len(payload))]


def test_every_single_byte_corruption_decodes_as_the_general_path_or_is_rejected() -> None:
    """Flip each byte of a record's payload (with valid framing, as a corrupt writer would leave
    it): the hot path either gives exactly the general path's value or raises CorruptRecordError;
    where the general path rejects a record, the hot path does too, unless the flipped byte lies in
    the tag's text or the mode metadata, which a value does not depend on."""
    payload = encode_event("param/w_b.x", np.arange(12, dtype=np.float32).reshape(3, 4), 70, ModeKeys.TRAIN, 70,
                           wall_time=1.0)
    skipped = _spans_the_value_does_not_use(payload)
    record_value(framed(payload), "u", "k", 0)  # the pristine record first: later ones meet its template
    for i in range(len(payload)):
        for flip in (0x01, 0x80, 0xFF):
            mutated = bytearray(payload)
            mutated[i] ^= flip
            rec = framed(bytes(mutated))
            try:
                want: np.ndarray | None = general(bytes(rec))
            except CorruptRecordError:
                want = None
            try:
                got: np.ndarray | None = record_value(rec, "u", "k", 0)
            except CorruptRecordError:
                got = None
            if want is not None:
                assert got is not None, (i, flip)
                assert got.dtype == want.dtype and got.shape == want.shape, (i, flip)
                np.testing.assert_array_equal(got, want)
            elif got is not None:
                assert any(i in span for span in skipped), (i, flip)


def test_a_record_like_a_known_one_but_longer_is_rejected_as_the_general_path_does() -> None:
    """Same bytes as a decoded record up to the data, but a metadata length that runs past the
    Summary's declared end (and the record grown to match, framing valid): the general path
    rejects it, so must the hot path, template or not."""
    value = np.arange(6, dtype=np.float32)
    payload = bytearray(encode_event("grow", value, 5, ModeKeys.TRAIN, 5, wall_time=2.0))
    record_value(framed(bytes(payload)), "u", "k", 0)  # known now
    meta_at = payload.rindex(b"\x4a")
    payload[meta_at + 1] += 3
    grown = bytes(payload) + b"\x00\x00\x00"
    with pytest.raises(CorruptRecordError):
        general(bytes(framed(grown)))
    with pytest.raises(CorruptRecordError, match="at offset 9: cannot decode event"):
        record_value(framed(grown), "u", "k", 9)


def test_smdebug_written_records_take_the_lean_walk(fixture_trials: Path) -> None:
    checked = 0
    for name in ("healthy_eval", "vanishing"):
        for f in sorted((fixture_trials / name / "events").rglob("*.tfevents"))[:12]:
            buf = f.read_bytes()
            for offset, payload in iter_records(buf, where=str(f)):
                record = memoryview(bytearray(buf[offset: offset + 16 + len(payload)]))
                assert lean_taken(record), (f, offset)
                got = record_value(record, "u", str(f), offset)
                want = decode_event(payload).value
                assert got.dtype == want.dtype and got.shape == want.shape
                np.testing.assert_array_equal(got, want)
                checked += 1
    assert checked > 500


@pytest.mark.parametrize("backend", ["local", "s3"])
def test_large_values_are_mapped_or_aligned_writable_and_right(backend: str, tmp_path: Path,
                                                    request: pytest.FixtureRequest) -> None:
    rng = np.random.default_rng(1)
    values = {name: rng.standard_normal((700, 1001)).astype(np.float32)  # 2.7 MiB each
              for name in ("w", "odd_name.weight_x", "t" * 5000)}  # the last one's layout outgrows the head read
    TrialWriter(tmp_path).write_step(3, ModeKeys.TRAIN, 3, values.items())
    path = str(tmp_path)
    if backend == "s3":
        s3_client: Any = request.getfixturevalue("s3_client")
        bucket: str = request.getfixturevalue("bucket")
        for f in tmp_path.rglob("*.*"):
            s3_client.put_object(Bucket=bucket, Key=f"t/{f.relative_to(tmp_path).as_posix()}", Body=f.read_bytes())
        path = f"s3://{bucket}/t"
    trial = create_trial(path, s3_client=request.getfixturevalue("s3_client") if backend == "s3" else None)
    for name, value in values.items():
        got = trial.tensor(name).value(3)
        np.testing.assert_array_equal(got, value)
        assert got.flags.writeable
        # a local value is a private mapping of the file (aligned where its data is aligned in the
        # file, test below); an S3 body is read into aligned memory of the reader's own
        assert _mapped(got) if backend == "local" else got.flags.aligned, name
        got[0, 0] = 1e9  # its own memory
        assert trial.tensor(name).value(3)[0, 0] == value[0, 0]


def _mapped(value: np.ndarray) -> bool:
    """Whether `value` is a view of a file mapping (its base chain ends in an mmap)."""
    base: Any = value
    while isinstance(base, np.ndarray):
        base = base.base
    return isinstance(base, mmap.mmap) or (isinstance(base, memoryview) and isinstance(base.obj, mmap.mmap))


def _data_offsets(root: Path, name: str) -> dict[int, int]:
    """step -> file offset of `name`'s data in its events file."""
    out = {}
    for index in sorted(root.glob("index/*/*.json")):
        meta = json.loads(index.read_text())
        [rec] = [p for p in meta["tensor_payload"] if p["tensorname"] == name]
        with open(root / meta["meta"]["event_file_name"], "rb") as f:
            f.seek(rec["start_idx"])
            head = memoryview(bytearray(f.read(4096)))
        offset = _data_offset(head, rec["length"])
        assert offset is not None
        out[int(index.name.split("_")[0])] = rec["start_idx"] + offset
    return out


def test_large_local_values_are_private_mappings_independent_of_each_other_and_of_the_file(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    names = ["w" * k for k in range(1, 5)]  # tags of 1-4 bytes: the data's offsets in the file differ by one
    values = {(n, s): rng.standard_normal((700, 1001)).astype(np.float32) for n in names for s in range(2)}
    writer = TrialWriter(tmp_path / "t")
    for s in range(2):
        writer.write_step(s, ModeKeys.TRAIN, s, [(n, values[(n, s)]) for n in names])
    offsets = {(n, s): off for n in names for s, off in _data_offsets(tmp_path / "t", n).items()}
    files = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (tmp_path / "t").rglob("*.tfevents")}
    trial = create_trial(tmp_path / "t")
    got = {key: trial.tensor(key[0]).value(key[1]) for key in values}
    mapped = {key for key, v in got.items() if _mapped(v)}
    for key, v in got.items():
        np.testing.assert_array_equal(v, values[key])
        assert v.flags.writeable
        # numpy's aligned flag says where the data lies in the file: on the float32 grid or not
        assert v.flags.aligned == (offsets[key] % 4 == 0), key
    # zero-copy wherever the data lies: an unaligned value is a view too (a copy would cost the
    # fresh memory it fills), and numpy computes on it as on any array
    assert mapped == set(values)
    assert 0 < len([v for v in got.values() if v.flags.aligned]) < len(values)
    unaligned = next(key for key, v in got.items() if not v.flags.aligned)
    assert float(np.sum(got[unaligned], dtype=np.float64)) == pytest.approx(float(np.sum(values[unaligned],
                                                                                         dtype=np.float64)))
    assert float(np.linalg.norm(got[unaligned])) == pytest.approx(float(np.linalg.norm(values[unaligned])), rel=1e-5)
    np.testing.assert_allclose(got[unaligned] @ got[unaligned][:8].T, values[unaligned] @ values[unaligned][:8].T,
                               rtol=1e-4, atol=1e-3)
    key = unaligned
    again = trial.tensor(key[0]).value(key[1])
    got[key][:] = -1.0  # a write to one value: its own pages only
    np.testing.assert_array_equal(again, values[key])
    np.testing.assert_array_equal(trial.tensor(key[0]).value(key[1]), values[key])
    assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in files} == files  # the file never changes
    shutil.rmtree(tmp_path / "t")  # values outlive their files (a mapping keeps the data it maps)
    np.testing.assert_array_equal(again, values[key])
    for other in values.keys() - {key}:
        np.testing.assert_array_equal(got[other], values[other])


def test_large_s3_values_are_read_aligned_in_one_get_without_a_copy(tmp_path: Path, s3_client: Any,
                                                                     bucket: str) -> None:
    """Records whose data lies off the float32 grid in their file: each value is one GET, its body
    read into place so that the data is aligned (a view of that buffer, not a copy of it)."""
    rng = np.random.default_rng(3)
    names = ["w" * k for k in range(1, 5)]  # data offsets differing by one byte
    values = {n: rng.standard_normal((700, 1001)).astype(np.float32) for n in names}
    TrialWriter(tmp_path / "t").write_step(0, ModeKeys.TRAIN, 0, values.items())
    offsets = {n: off for n in names for off in _data_offsets(tmp_path / "t", n).values()}
    assert {off % 4 for off in offsets.values()} != {0}  # some data lies unaligned in the file
    for f in (tmp_path / "t").rglob("*.*"):
        s3_client.put_object(Bucket=bucket, Key=f"t/{f.relative_to(tmp_path / 't').as_posix()}", Body=f.read_bytes())
    trial = create_trial(f"s3://{bucket}/t", s3_client=s3_client)
    names_seen = trial.tensor_names()
    assert set(names) <= set(names_seen)
    gets: list[str] = []
    s3_client.meta.events.register("provide-client-params.s3.GetObject", lambda params, **_: gets.append(params["Key"]))
    for n in names:
        got = trial.tensor(n).value(0)
        np.testing.assert_array_equal(got, values[n])
        assert got.flags.aligned and got.flags.writeable and got.ctypes.data % 64 == 0, n
        assert not got.flags.owndata, n  # a view of the buffer the body was read into
    assert len(gets) == len(names), gets
