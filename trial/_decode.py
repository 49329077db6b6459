"""The value of one framed tensor record, on the reader's hot path.

`record_value` checks the framing (length CRC, smdebug's constant footer, exact size) and walks the
Event by hand for the layout both smdebug's writer and ours produce: Event{wall_time, step,
summary{value{tag, tensor{dtype, tensor_shape, tensor_content}, metadata}}}. Anything else (values
in float_val/string_val, unknown fields, odd field order, a DT_INVALID string tensor) and every
error go through the general decoders (`tfrecord.decode_record`, `proto.decode_event`), so what
is accepted, what is rejected and the error messages stay those of the general path. The lean
walk checks the structure (every length adds up exactly, to the byte) but reads neither the tag's
text nor the mode plugin data, which a value does not use (the format has no checksum over the
payload: a flipped byte inside tensor_content goes unnoticed by any reader, smdebug's included).
"""
from __future__ import annotations

import struct

import numpy as np

from trial.proto import DT_TO_NP, decode_event
from trial.tfrecord import FOOTER, FOOTER_SIZE, HEADER_SIZE, decode_record, masked_crc32c

_HEADER = struct.Struct("<QI")
_U32 = struct.Struct("<I")
_FOOTER_U32 = _U32.unpack(FOOTER)[0]
_LEN = struct.Struct("<Q")
_MAX_CACHED_CRCS = 1 << 16

# masked CRC32C of a record's 8 length bytes, per length. The length CRC is the only checksum the
# format has (the footer is a constant), and a trial's records come in few distinct lengths (one
# per tensor shape and name length), so each is computed once instead of per record.
_length_crcs: dict[int, int] = {}

# Event / Summary / Summary.Value / TensorProto / TensorShapeProto(.Dim) field keys (number << 3 | wire type).
_K_WALL_TIME, _K_STEP, _K_SUMMARY = 0x09, 0x10, 0x2A
_K_VALUE, _K_TAG, _K_TENSOR, _K_METADATA = 0x0A, 0x0A, 0x42, 0x4A
_K_DTYPE, _K_SHAPE, _K_CONTENT = 0x08, 0x12, 0x22
_K_DIM, _K_DIM_SIZE, _K_DIM_NAME = 0x12, 0x08, 0x12


def _length_crc(length: int) -> int:
    crc = _length_crcs.get(length)
    if crc is None:
        if len(_length_crcs) >= _MAX_CACHED_CRCS:
            _length_crcs.clear()
        crc = _length_crcs[length] = masked_crc32c(_LEN.pack(length))
    return crc


def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
    """(value, position after it) of the varint at `pos`."""
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result, shift = b & 0x7F, 7
    while True:
        pos += 1
        b = buf[pos]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos + 1
        shift += 7


def _lean_value(buf: memoryview, pos: int, end: int) -> np.ndarray | None:
    """The tensor of the Event in buf[pos:end] when it has the common layout, else None.

    Lengths below 128 (one byte) are read inline: all of them but the tensor_content's and the
    Summary's in small records, and this function is most of the time a small value costs."""
    if buf[pos] == _K_WALL_TIME:
        pos += 9
    if buf[pos] == _K_STEP:
        pos += 1
        while buf[pos] & 0x80:
            pos += 1
        pos += 1
    if buf[pos] != _K_SUMMARY:
        return None
    n = buf[pos + 1]
    if n < 0x80:
        pos += 2
    else:
        n, pos = _varint(buf, pos + 1)
    if pos + n != end or buf[pos] != _K_VALUE:  # exactly one Summary, holding exactly one Value
        return None
    n = buf[pos + 1]
    if n < 0x80:
        pos += 2
    else:
        n, pos = _varint(buf, pos + 1)
    if pos + n != end or buf[pos] != _K_TAG:
        return None
    n = buf[pos + 1]
    pos = pos + 2 + n if n < 0x80 else sum(_varint(buf, pos + 1))
    if buf[pos] != _K_TENSOR:
        return None
    n = buf[pos + 1]
    if n < 0x80:
        pos += 2
    else:
        n, pos = _varint(buf, pos + 1)
    tensor_end = pos + n
    if tensor_end != end:  # then only the metadata, ending exactly at the end
        if tensor_end > end or buf[tensor_end] != _K_METADATA:
            return None
        n = buf[tensor_end + 1]
        if (tensor_end + 2 + n if n < 0x80 else sum(_varint(buf, tensor_end + 1))) != end:
            return None
    if buf[pos] != _K_DTYPE:
        return None  # DT_INVALID (strings): the general path
    dtype = buf[pos + 1]  # every dtype with tensor_content is below 128
    if buf[pos + 2] != _K_SHAPE:
        return None
    n = buf[pos + 3]
    if n < 0x80:
        pos += 4
    else:
        n, pos = _varint(buf, pos + 3)
    shape_end = pos + n
    shape = []
    count = 1
    while pos < shape_end:
        if buf[pos] != _K_DIM:
            return None
        n = buf[pos + 1]
        if n < 0x80:
            pos += 2
        else:
            n, pos = _varint(buf, pos + 1)
        dim_end = pos + n
        size = 0
        if pos < dim_end and buf[pos] == _K_DIM_SIZE:
            size, pos = _varint(buf, pos + 1)
            if size >= 1 << 63:  # a negative (unknown) dimension: not a stored value's shape
                return None
        if pos < dim_end:  # then only the dim's name (not needed for the value), ending at dim_end
            if buf[pos] != _K_DIM_NAME:
                return None
            n = buf[pos + 1]
            pos = pos + 2 + n if n < 0x80 else sum(_varint(buf, pos + 1))
        if pos != dim_end:
            return None
        shape.append(size)
        count *= size
    if pos != shape_end or buf[pos] != _K_CONTENT:
        return None
    n, pos = _varint(buf, pos + 1)
    np_dtype = DT_TO_NP.get(dtype)
    if pos + n != tensor_end or np_dtype is None or n == 0 or n != count * np_dtype.itemsize:
        return None
    # np.ndarray over the buffer: the same view as np.frombuffer(...).reshape(...), at a quarter of its cost
    return np.ndarray(shape, np_dtype, buf, pos)


def record_value(buf: memoryview, uri: str, key: str, offset: int) -> np.ndarray:
    """The value stored in `buf`, exactly one framed record read from `key` at `offset`. A
    writable buffer becomes the value's own memory (no copy); a read-only one is copied, so a
    caller may always modify the value it gets. Raises CorruptRecordError naming file and offset."""
    size = len(buf)
    if size >= HEADER_SIZE + FOOTER_SIZE:
        length, crc = _HEADER.unpack_from(buf, 0)
        end = HEADER_SIZE + length
        if (end + FOOTER_SIZE == size and crc == _length_crc(length)
                and _U32.unpack_from(buf, end)[0] == _FOOTER_U32):
            try:
                value = _lean_value(buf, HEADER_SIZE, end)
            except IndexError:  # a length pointing past the record: let the general path say why
                value = None
            if value is not None:
                return value if value.flags.writeable else value.copy()
    where = f"{uri}/{key}"
    payload = decode_record(buf, where=where, offset=offset)
    return decode_event(payload, where=where, offset=offset).value
