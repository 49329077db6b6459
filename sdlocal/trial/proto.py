"""Event payloads (one tensor per Event) with tensorboard's TF-compatible protobufs."""
from __future__ import annotations

import struct
import time
from dataclasses import dataclass

import numpy as np
from tensorboard.compat.proto import tensor_pb2, tensor_shape_pb2

from sdlocal.trial.errors import CorruptRecordError
from sdlocal.trial.modes import ModeKeys

MODE_STEP_PLUGIN_NAME = "mode_step"
MODE_PLUGIN_NAME = "mode"

# TF DataType enum values.
DT_INVALID, DT_FLOAT, DT_DOUBLE, DT_INT32, DT_UINT8, DT_INT16, DT_INT8, DT_STRING = 0, 1, 2, 3, 4, 5, 6, 7
DT_COMPLEX64, DT_INT64, DT_BOOL, DT_UINT16, DT_COMPLEX128, DT_HALF, DT_UINT32, DT_UINT64 = 8, 9, 10, 17, 18, 19, 22, 23

_NP_TO_DT: dict[np.dtype, int] = {
    np.dtype(np.float16): DT_HALF,
    np.dtype(np.float32): DT_FLOAT,
    np.dtype(np.float64): DT_DOUBLE,
    np.dtype(np.int8): DT_INT8,
    np.dtype(np.int16): DT_INT16,
    np.dtype(np.int32): DT_INT32,
    np.dtype(np.int64): DT_INT64,
    np.dtype(np.uint8): DT_UINT8,
    np.dtype(np.uint16): DT_UINT16,
    np.dtype(np.uint32): DT_UINT32,
    np.dtype(np.uint64): DT_UINT64,
    np.dtype(np.bool_): DT_BOOL,
    np.dtype(np.complex64): DT_COMPLEX64,
    np.dtype(np.complex128): DT_COMPLEX128,
}
# Little-endian numpy dtype of each TF dtype (tensor_content is raw little-endian C order).
DT_TO_NP: dict[int, np.dtype] = {dt: np_dt.newbyteorder("<") for np_dt, dt in _NP_TO_DT.items()}


@dataclass(frozen=True)
class DecodedTensor:
    name: str
    value: np.ndarray
    step: int
    mode: ModeKeys
    mode_step: int
    wall_time: float = 0.0


def to_numpy(value: object) -> np.ndarray:
    """An ndarray we can serialize: bf16 (and other float types numpy lacks) become float32,
    big-endian data becomes little-endian."""
    arr = value if isinstance(value, np.ndarray) else np.asarray(value)
    if arr.dtype.kind in "USO":
        return arr
    if arr.dtype not in _NP_TO_DT:
        if arr.dtype.name == "bfloat16" or arr.dtype.kind == "f" or arr.dtype.kind == "V":
            arr = arr.astype(np.float32)
        elif arr.dtype.newbyteorder("=") in _NP_TO_DT:
            arr = arr.astype(arr.dtype.newbyteorder("<"))
        else:
            raise TypeError(f"unsupported dtype {arr.dtype}")
    elif arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    return arr


def make_tensor_proto(name: str, value: object) -> tensor_pb2.TensorProto:
    arr = to_numpy(value)
    # smdebug names every dim "<tag>_<size>"; we do the same so the files are identical.
    dims = [tensor_shape_pb2.TensorShapeProto.Dim(size=int(d), name=f"{name}_{d}") for d in arr.shape]
    shape = tensor_shape_pb2.TensorShapeProto(dim=dims)
    if arr.dtype.kind in "USO":
        strings = [s if isinstance(s, bytes) else str(s).encode("utf-8") for s in arr.ravel().tolist()]
        return tensor_pb2.TensorProto(dtype=DT_INVALID, tensor_shape=shape, string_val=strings)
    content = arr.tobytes(order="C")
    return tensor_pb2.TensorProto(dtype=_NP_TO_DT[arr.dtype.newbyteorder("=")], tensor_shape=shape,
                                  tensor_content=content)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field_bytes(field: int, data: bytes) -> bytes:
    return _varint((field << 3) | 2) + _varint(len(data)) + data


def _metadata_bytes(mode: int, mode_step: int) -> bytes:
    # SummaryMetadata with TWO plugin_data entries. tensorboard's proto declares plugin_data as a
    # singular field (smdebug's copy declares it repeated), so this one message is hand-encoded.
    entries = b"".join(
        _field_bytes(1, _field_bytes(1, name.encode()) + _field_bytes(2, content.encode()))
        for name, content in ((MODE_STEP_PLUGIN_NAME, str(int(mode_step))), (MODE_PLUGIN_NAME, str(int(mode))))
    )
    return _field_bytes(9, entries)


_WALL_TIME = struct.Struct("<d")


def _len_prefix(field: int, length: int) -> bytes:
    return _varint((field << 3) | 2) + _varint(length)


def _tensor_parts(name: str, value: object) -> list[bytes | memoryview]:
    """A serialized TensorProto as pieces, the raw data a zero-copy view of the array. Same bytes
    as tensorboard's TensorProto.SerializeToString (proto3: zero/empty fields omitted)."""
    arr = to_numpy(value)
    if arr.dtype.kind in "USO":
        return [make_tensor_proto(name, arr).SerializeToString()]
    dtype = _NP_TO_DT[arr.dtype.newbyteorder("=")]
    dims = []
    for d in arr.shape:
        dim_name = f"{name}_{d}".encode()
        dim = (b"\x08" + _varint(d) if d else b"") + _field_bytes(2, dim_name)
        dims.append(_field_bytes(2, dim))
    shape = b"".join(dims)
    # tensor_shape is always present, even empty for a 0-d tensor (as protobuf writes a set message)
    head = (b"\x08" + _varint(dtype) if dtype else b"") + _field_bytes(2, shape)
    if arr.size == 0:
        return [head]
    data = np.ascontiguousarray(arr).reshape(-1).view(np.uint8).data
    return [head + _len_prefix(4, data.nbytes), data]


def encode_event_parts(
    name: str,
    array: object,
    step: int,
    mode: ModeKeys | int,
    mode_step: int,
    wall_time: float | None = None,
) -> list[bytes | memoryview]:
    """`encode_event` as pieces to join (or write) once: the tensor data is never copied here."""
    tensor = _tensor_parts(name, array)
    tensor_len = sum(len(p) if isinstance(p, bytes) else p.nbytes for p in tensor)
    tag = _field_bytes(1, name.encode("utf-8"))
    meta = _metadata_bytes(int(mode), mode_step)
    tensor_head = _len_prefix(8, tensor_len)
    value_len = len(tag) + len(tensor_head) + tensor_len + len(meta)
    value_head = _len_prefix(1, value_len)
    summary_len = len(value_head) + value_len
    wt = time.time() if wall_time is None else float(wall_time)
    head = b"\x09" + _WALL_TIME.pack(wt) if wt else b""
    step_i = int(step)
    if step_i:
        head += b"\x10" + _varint(step_i & 0xFFFFFFFFFFFFFFFF)
    head += _len_prefix(5, summary_len) + value_head + tag + tensor_head
    return [head, *tensor, meta]


def encode_event(
    name: str,
    array: object,
    step: int,
    mode: ModeKeys | int,
    mode_step: int,
    wall_time: float | None = None,
) -> bytes:
    """The serialized Event smdebug writes for one tensor (not framed: see tfrecord.encode_record).

    Byte-identical to smdebug's (fields in field-number order): Event{wall_time=1, step=2,
    summary=5{value=1{tag=1, tensor=8, metadata=9{plugin_data=1 (mode_step), plugin_data=1 (mode)}}}}.
    """
    return b"".join(encode_event_parts(name, array, step, mode, mode_step, wall_time))


def _values_from_fields(tp: tensor_pb2.TensorProto, dtype: int, shape: tuple[int, ...]) -> np.ndarray:
    np_dtype = DT_TO_NP.get(dtype)
    vals: object
    if dtype == DT_HALF:
        vals = np.asarray(tp.half_val, dtype=np.uint16).view(np.float16)
    elif dtype == DT_FLOAT:
        vals = tp.float_val
    elif dtype == DT_DOUBLE:
        vals = tp.double_val
    elif dtype in (DT_INT32, DT_INT16, DT_INT8, DT_UINT8, DT_UINT16):
        vals = tp.int_val
    elif dtype == DT_INT64:
        vals = tp.int64_val
    elif dtype == DT_UINT32:
        vals = tp.uint32_val
    elif dtype == DT_UINT64:
        vals = tp.uint64_val
    elif dtype == DT_BOOL:
        vals = tp.bool_val
    elif dtype == DT_COMPLEX64:
        vals = np.asarray(tp.scomplex_val, dtype=np.float32).view(np.complex64)
    elif dtype == DT_COMPLEX128:
        vals = np.asarray(tp.dcomplex_val, dtype=np.float64).view(np.complex128)
    else:
        raise ValueError(f"unsupported tensor dtype {dtype}")
    arr = np.asarray(vals, dtype=np_dtype)
    n = int(np.prod(shape, dtype=np.int64))
    if arr.size == n:
        return arr.reshape(shape)
    if arr.size == 1 or (arr.size < n and arr.size > 0):
        # TF semantics: the last value repeats to fill the shape.
        out = np.empty(n, dtype=arr.dtype)
        out[: arr.size] = arr
        out[arr.size :] = arr[-1]
        return out.reshape(shape)
    if arr.size == 0 and n == 0:
        return arr.reshape(shape)
    if not shape:
        return arr.reshape(-1)
    raise ValueError(f"{arr.size} values for shape {shape}")


def tensor_value(tp: tensor_pb2.TensorProto) -> np.ndarray:
    shape = tuple(d.size for d in tp.tensor_shape.dim)
    dtype = tp.dtype
    if dtype in (DT_INVALID, DT_STRING):
        strings = [s.decode("utf-8", errors="replace") for s in tp.string_val]
        return np.array(strings, dtype=str).reshape(shape) if strings or 0 in shape else np.array(strings, dtype=str)
    content = tp.tensor_content
    if content:
        np_dtype = DT_TO_NP.get(dtype)
        if np_dtype is None:
            raise ValueError(f"unsupported tensor dtype {dtype}")
        return np.frombuffer(content, dtype=np_dtype).reshape(shape)
    return _values_from_fields(tp, dtype, shape)


def _read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes | memoryview, pos: int, end: int) -> list[tuple[int, int, int, int]]:
    """(field number, wire type, value or start, end) of each field of one message."""
    out = []
    while pos < end:
        key, pos = _read_varint(buf, pos)
        field, wtype = key >> 3, key & 7
        if wtype == 0:
            v, pos = _read_varint(buf, pos)
            out.append((field, 0, v, pos))
        elif wtype == 2:
            n, pos = _read_varint(buf, pos)
            out.append((field, 2, pos, pos + n))
            pos += n
        elif wtype == 1:
            out.append((field, 1, pos, pos + 8))
            pos += 8
        elif wtype == 5:
            out.append((field, 5, pos, pos + 4))
            pos += 4
        else:
            raise ValueError(f"unsupported wire type {wtype}")
    if pos != end:
        raise ValueError("message overruns its length")
    return out


def _signed64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _decode_tensor(buf: bytes | memoryview, start: int, end: int) -> np.ndarray:
    dtype = 0
    shape: list[int] = []
    content: tuple[int, int] | None = None
    for field, wtype, a, b in _fields(buf, start, end):
        if field == 1 and wtype == 0:
            dtype = a
        elif field == 2 and wtype == 2:
            for dfield, dwt, da, db in _fields(buf, a, b):
                if dfield == 2 and dwt == 2:
                    size = 0
                    for sf, swt, sa, _ in _fields(buf, da, db):
                        if sf == 1 and swt == 0:
                            size = _signed64(sa)
                    shape.append(size)
        elif field == 4 and wtype == 2:
            content = (a, b)
        else:  # values in float_val/int_val/string_val/...: let protobuf decode them
            return tensor_value(tensor_pb2.TensorProto.FromString(bytes(buf[start:end])))
    if content is None or content[0] == content[1]:
        return tensor_value(tensor_pb2.TensorProto.FromString(bytes(buf[start:end])))
    np_dtype = DT_TO_NP.get(dtype)
    if np_dtype is None:
        raise ValueError(f"unsupported tensor dtype {dtype}")
    a, b = content
    count = (b - a) // np_dtype.itemsize
    array = np.frombuffer(buf, dtype=np_dtype, count=count, offset=a).reshape(shape)
    # Callers may modify a value in place: a read-only buffer (bytes) is copied; a writable one
    # (the bytearray a ranged read filled) is this value's own memory and is used as it is.
    return array if array.flags.writeable else array.copy()


def decode_event(payload: bytes | memoryview, *, where: str = "", offset: int | None = None) -> DecodedTensor:
    """The tensor of one Event payload (as written by smdebug's hook or ours).

    The envelope is walked by hand: tensorboard's SummaryMetadata declares plugin_data singular,
    so parsing with it would merge smdebug's two plugin_data entries into one. tensor_content is
    read with np.frombuffer straight from the payload.
    """
    buf = payload
    try:
        wall_time = 0.0
        step = 0
        summary: tuple[int, int] | None = None
        for field, wtype, a, b in _fields(buf, 0, len(buf)):
            if field == 1 and wtype == 1:
                (wall_time,) = _WALL_TIME.unpack_from(buf, a)
            elif field == 2 and wtype == 0:
                step = _signed64(a)
            elif field == 5 and wtype == 2:
                summary = (a, b)
        if summary is None:
            raise ValueError("event has no summary")
        value = next(((a, b) for f, w, a, b in _fields(buf, *summary) if f == 1 and w == 2), None)
        if value is None:
            raise ValueError("summary has no value")
        tag = ""
        mode = ModeKeys.GLOBAL
        mode_step = step
        arr: np.ndarray | None = None
        for field, wtype, a, b in _fields(buf, *value):
            if field == 1 and wtype == 2:
                tag = bytes(buf[a:b]).decode("utf-8")
            elif field == 8 and wtype == 2:
                arr = _decode_tensor(buf, a, b)
            elif field == 9 and wtype == 2:
                for pf, pw, pa, pb in _fields(buf, a, b):
                    if pf != 1 or pw != 2:
                        continue
                    name = content = b""
                    for f2, w2, a2, b2 in _fields(buf, pa, pb):
                        if f2 == 1 and w2 == 2:
                            name = bytes(buf[a2:b2])
                        elif f2 == 2 and w2 == 2:
                            content = bytes(buf[a2:b2])
                    if name == b"mode_step":
                        mode_step = int(content)
                    elif name == b"mode":
                        mode = ModeKeys(int(content))
        if arr is None:
            raise ValueError("value has no tensor")
    except Exception as e:  # truncated varints, bad plugin data, bad shape, unknown dtype
        raise CorruptRecordError(f"cannot decode event: {e}", where=where, offset=offset) from e
    return DecodedTensor(tag, arr, step, mode, mode_step, wall_time)
