"""The value of one framed tensor record, on the reader's hot path (Trial.read_record).

`read_value` does the ranged read; `record_value` checks the framing (length CRC, smdebug's
constant footer, exact size) and walks the Event by hand for the layout both smdebug's writer and
ours produce: Event{wall_time, step, summary{value{tag, tensor{dtype, tensor_shape,
tensor_content}, metadata}}}. Anything else (values in float_val/string_val, unknown fields, odd
field order, a DT_INVALID string tensor) and every error go through the general decoders
(`tfrecord.decode_record`, `proto.decode_event`), so what is accepted, what is rejected and the
error messages stay those of the general path. The lean walk checks the structure (every length
adds up exactly, to the byte) but reads neither the tag's text nor the mode plugin data, which a
value does not use (the format has no checksum over the payload: a flipped byte inside
tensor_content goes unnoticed by any reader, smdebug's included).

A tensor's records differ from step to step only in wall_time, step, metadata and data: the bytes
in between are walked once and kept as a template (`_layout`), so most records cost a dict lookup
and one comparison. Values are numpy views of the buffer the record was read into (its own
memory: nothing else refers to it), never copies, except from read-only buffers (S3 bodies).

Large records of a local trial (MAP_FROM_BYTES and more) are not read but mapped: each read maps
the record privately (copy-on-write, trial.storage._local.LocalStorage.map_range) and the value is
a view of that mapping: no fresh memory is filled and nothing is copied (a fresh page costs a
page fault, and filling 128 MiB of new memory ran at 0.3-1 GB/s on the project's VM). Each value
has a mapping of its own, writable, whose writes stay private: values are as independent as
copies. A record whose data is not aligned to its element size in the file (step 0's in both
writers' files: proto3 leaves step 0 out, two bytes shorter; and, in smdebug's step files, every
record after one whose length is not a multiple of 4) is still a view: numpy handles unaligned
arrays (`flags.aligned` False) correctly, and a copy into aligned memory cost the fresh memory
it fills (0.3-1 GB/s on the project's VM: reads through it ran at 0.5 GB/s). Elementwise work on
an unaligned value is slower (a 64 MiB mean 3 -> 30 ms) but far cheaper than that copy;
`value.copy()` aligns it where a caller uses it many times, and trial.tensor's l2 norm goes by
aligned chunks (np.linalg.norm would copy it whole at every call).
"""
from __future__ import annotations

import struct
from typing import TYPE_CHECKING

import numpy as np

from sdlocal.trial.errors import CorruptRecordError
from sdlocal.trial.proto import DT_TO_NP, decode_event
from sdlocal.trial.tfrecord import FOOTER, FOOTER_SIZE, HEADER_SIZE, decode_record, masked_crc32c

if TYPE_CHECKING:
    from sdlocal.trial.storage import Storage

_HEADER = struct.Struct("<QI")
_U32 = struct.Struct("<I")
_FOOTER_U32 = _U32.unpack(FOOTER)[0]
_LEN = struct.Struct("<Q")
_MAX_CACHED_CRCS = 1 << 16
ALIGN_FROM_BYTES = 1 << 20  # records from this size on are read with their data aligned
MAP_FROM_BYTES = 1 << 20  # records from this size on are mapped where the storage can (LocalStorage)
_HEAD_BYTES = 4096  # read first from a large record: holds its layout unless the tag is huge

# masked CRC32C of a record's 8 length bytes, per length. The length CRC is the only checksum the
# format has (the footer is a constant), and a trial's records come in few distinct lengths (one
# per tensor shape and name length), so each is computed once instead of per record.
_length_crcs: dict[int, int] = {}

# _layout's templates: first _TEMPLATE_KEY_BYTES bytes of a Summary -> (its bytes up to the
# tensor_content, its length, dtype, shape, content bytes). One per tensor (and metadata length).
_TEMPLATE_KEY_BYTES = 24
_MAX_TEMPLATES = 1 << 14
_templates: dict[bytes, tuple[bytes, int, np.dtype, tuple[int, ...], int]] = {}
_Layout = tuple[np.dtype, tuple[int, ...], int, int]  # dtype, shape, data offset, data bytes

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


def _tail_is_metadata(buf: memoryview, tensor_end: int, end: int) -> bool:
    """Whether buf[tensor_end:end] is nothing, or exactly one metadata field."""
    if tensor_end == end:
        return True
    if tensor_end > end or buf[tensor_end] != _K_METADATA:
        return False
    n = buf[tensor_end + 1]
    return (tensor_end + 2 + n if n < 0x80 else sum(_varint(buf, tensor_end + 1))) == end


def _layout(buf: memoryview, pos: int, end: int, whole: bool = True) -> _Layout | None:
    """(dtype, shape, data offset, data bytes) of the Event in buf[pos:end] when it has the common
    layout, else None. `whole=False`: buf holds only the record's start (up to the data at least);
    what follows the data is then not checked.

    The bytes from the Summary's key to the start of tensor_content are the same at every step a
    tensor is saved (lengths, tag, dtype, shape): once walked, they are kept as a template, and a
    record whose bytes there are equal to a template's is decoded from it, without the walk."""
    if buf[pos] == _K_WALL_TIME:
        pos += 9
    if buf[pos] == _K_STEP:
        pos += 1
        while buf[pos] & 0x80:
            pos += 1
        pos += 1
    # The first bytes hold the Summary's and the Value's lengths (so, the distance to `end`) and
    # the tag's start: a template whose whole prefix matches describes this record exactly.
    key = buf[pos: pos + _TEMPLATE_KEY_BYTES].tobytes()
    template = _templates.get(key)
    if template is not None:
        prefix, span, np_dtype, shape, nbytes = template
        content = pos + len(prefix)
        # the same bytes up to the data, the Summary ending where this record ends (its length is
        # in the prefix), then the metadata: what the walk would check, it would find the same
        if (end - pos == span and buf[pos:content].tobytes() == prefix
                and (not whole or _tail_is_metadata(buf, content + nbytes, end))):
            return np_dtype, shape, content, nbytes
    walked = _walk(buf, pos, end, whole)
    if walked is not None:
        if len(_templates) >= _MAX_TEMPLATES:
            _templates.clear()
        _templates[key] = (buf[pos:walked[2]].tobytes(), end - pos, walked[0], walked[1], walked[3])
    return walked


def _walk(buf: memoryview, pos: int, end: int, whole: bool) -> _Layout | None:
    """_layout of the Summary at buf[pos], the long way. Lengths below 128 (one byte) are read inline."""
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
    if whole and not _tail_is_metadata(buf, tensor_end, end):  # after the tensor, only the metadata
        return None
    return np_dtype, tuple(shape), pos, n


def read_value(storage: Storage, key: str, start: int, length: int) -> np.ndarray:
    """The value of the `length`-byte record at `start` of `key`: one ranged read. A large record
    read into a buffer of our own is placed so that its data lies on a 64-byte boundary, as in
    numpy's own arrays (reductions over unaligned data run about 2x slower, measured): locally
    its first bytes are read first, to find where its data starts; over HTTP (S3) the storage
    hands the first bytes of the body to `locate` before it reads the rest into place. Other
    values are either small or copied (read-only buffers), which aligns them."""
    if length >= MAP_FROM_BYTES and storage.maps_files:
        mapped = storage.map_range(key, start, length)
        if mapped is not None:
            return record_value(mapped, storage.uri, key, start)
    aligned_at = None
    large = length >= ALIGN_FROM_BYTES and storage.fills_own_buffers
    locate = None
    if large and storage.cheap_small_reads:
        head = storage.read_range(key, start, min(length, _HEAD_BYTES))
        aligned_at = _data_offset(head, length)
    elif large:  # over HTTP: the data's place found from the body's first bytes, in the same GET
        def locate(head: memoryview) -> int | None:
            return _data_offset(head, length)
    if locate is None:
        data = storage.read_range(key, start, length, aligned_at)
    else:
        data = storage.read_range(key, start, length, aligned_at, locate)
    value = read_record_value(data, length, storage.uri, key, start)
    # read in one request (S3): aligned by a copy where it landed unaligned, which costs little
    # beside the request itself
    return value.copy() if large and aligned_at is None and not value.flags.aligned else value


def _data_offset(head: memoryview, length: int) -> int | None:
    """Where the data of a record of `length` bytes starts, from its first bytes (None if unsure:
    an uncommon layout, or a prefix longer than the head; the general path will decide)."""
    if len(head) < HEADER_SIZE + 2:
        return None
    (payload_length,) = _LEN.unpack_from(head, 0)
    if HEADER_SIZE + payload_length + FOOTER_SIZE != length:
        return None
    try:
        layout = _layout(head, HEADER_SIZE, HEADER_SIZE + payload_length, whole=False)
    except IndexError:
        return None
    return None if layout is None else layout[2]


def read_record_value(data: memoryview, length: int, uri: str, key: str, offset: int) -> np.ndarray:
    """record_value of `data`, what a read of the `length`-byte record at `offset` of `key` got:
    fewer bytes are a truncated file (CorruptRecordError naming file and offset)."""
    if len(data) != length:
        raise CorruptRecordError(f"truncated: index says {length} bytes, file has {len(data)}",
                                 where=f"{uri}/{key}", offset=offset)
    return record_value(data, uri, key, offset)


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
                layout = _layout(buf, HEADER_SIZE, end)
            except IndexError:  # a length pointing past the record: let the general path say why
                layout = None
            if layout is not None:
                np_dtype, shape, data, _ = layout
                # np.ndarray over the buffer: the view np.frombuffer(...).reshape(...) makes, at a quarter of its cost
                value = np.ndarray(shape, np_dtype, buf, data)
                return value if value.flags.writeable else value.copy()
    where = f"{uri}/{key}"
    payload = decode_record(buf, where=where, offset=offset)
    return decode_event(payload, where=where, offset=offset).value
