"""TFRecord framing as smdebug writes it: `u64 len | u32 masked_crc32c(len) | payload | u32 footer`.

smdebug's footer is the constant masked_crc32c(b"0x12345678") rather than the payload's CRC, and
its reader requires that constant, so only the 8-byte length is ever CRC'd: a pure-Python table
is enough.
"""
from __future__ import annotations

import struct
from collections.abc import Iterator

from sdlocal.trial.errors import CorruptRecordError

HEADER_SIZE = 12
FOOTER_SIZE = 4
_CHECKSUM_MAGIC_BYTES = b"0x12345678"


def _make_table() -> list[int]:
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _make_table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    table = _TABLE
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


FOOTER = struct.pack("<I", masked_crc32c(_CHECKSUM_MAGIC_BYTES))  # b"\xb3\xc0\x2d\x06"
_LEN = struct.Struct("<Q")
_U32 = struct.Struct("<I")


def encode_header(payload_length: int) -> bytes:
    length = _LEN.pack(payload_length)
    return length + _U32.pack(masked_crc32c(length))


def encode_record(payload: bytes) -> bytes:
    """One framed record (header + payload + smdebug's constant footer)."""
    return encode_header(len(payload)) + payload + FOOTER


def framed_size(payload_length: int) -> int:
    return HEADER_SIZE + payload_length + FOOTER_SIZE


def _check_header(buf: bytes | memoryview, pos: int, where: str) -> int:
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(
            f"truncated record header ({len(buf) - pos} of {HEADER_SIZE} bytes)", where=where, offset=pos
        )
    length_bytes = bytes(buf[pos : pos + 8])
    (crc,) = _U32.unpack_from(buf, pos + 8)
    if masked_crc32c(length_bytes) != crc:
        raise CorruptRecordError("record length CRC mismatch", where=where, offset=pos)
    (length,) = _LEN.unpack(length_bytes)
    end = pos + HEADER_SIZE + length + FOOTER_SIZE
    if end > len(buf):
        raise CorruptRecordError(
            f"truncated record: needs {end - pos} bytes, {len(buf) - pos} available", where=where, offset=pos
        )
    if buf[end - FOOTER_SIZE : end] != FOOTER:
        raise CorruptRecordError("record footer is not smdebug's checksum constant", where=where, offset=pos)
    return int(length)


def decode_record(buf: bytes | memoryview, *, where: str = "", offset: int = 0) -> bytes | memoryview:
    """The payload of the single framed record in `buf` (exactly one record, as fetched by a ranged
    read). `where`/`offset` name the file and the record's offset in error messages."""
    try:
        length = _check_header(buf, 0, where)
    except CorruptRecordError as e:
        raise CorruptRecordError(str(e).split(": ", 1)[-1], where=where, offset=offset) from None
    if len(buf) != framed_size(length):
        raise CorruptRecordError(
            f"record spans {framed_size(length)} bytes, buffer has {len(buf)}", where=where, offset=offset
        )
    return buf[HEADER_SIZE : HEADER_SIZE + length]


def iter_records(buf: bytes | memoryview, *, where: str = "") -> Iterator[tuple[int, bytes | memoryview]]:
    """(offset, payload) of every record of a whole file."""
    pos = 0
    n = len(buf)
    while pos < n:
        length = _check_header(buf, pos, where)
        yield pos, buf[pos + HEADER_SIZE : pos + HEADER_SIZE + length]
        pos += HEADER_SIZE + length + FOOTER_SIZE
