"""Ranged GETs of the embedded S3 served from the stored file: only the range is read.

moto answers a ranged GET by taking the whole object (`FakeKey.value`) and slicing it, which made
every ranged read of a large object cost a read of all of it (a trial's values are ranges of its
step files: 0.05-0.25 GB/s for 64 MiB values), and sent the slice as one bytes object. Here, in a
GET with a Range header, a stored object's `value` is a `StoredRange`: moto still decides the answer
(206 and Content-Range, 416, a 200 for ranges it does not serve, conditional headers, ETag), and
the slice it takes is a `RangeBody`, the range streamed from the file in CHUNK pieces. What moto
does not slice (partNumber) is read whole. Installed by moto_disk.install_hooks unless
`SDLOCAL_S3_WHOLE_RANGES=1` (the benchmark's "before", benchmarks/s3_read.py).
"""
from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Iterator
from typing import Any

from sdlocal.launcher.s3.store import StoredObject

CHUNK = 1 << 20  # what a ranged GET's body is sent in


class StoredRange:
    """A stored object's bytes as moto's ranged GET uses them (`len`, then one slice): the slice is
    the range's bytes, read from the file only as they are sent (`RangeBody`)."""

    def __init__(self, obj: StoredObject) -> None:
        self.obj = obj

    def __len__(self) -> int:
        return self.obj.size

    def __getitem__(self, part: slice) -> RangeBody:
        if not isinstance(part, slice):
            raise TypeError("a stored object's bytes are sliced, not indexed")
        start, stop, step = part.indices(self.obj.size)
        if step != 1:
            raise ValueError("a stored object's bytes are sliced with step 1")
        return RangeBody(self.obj, start, max(0, stop - start))

    def whole(self) -> bytes:
        with open(self.obj.path, "rb") as f:
            f.seek(self.obj.offset)
            return f.read(self.obj.size)


class RangeBody:
    """`length` bytes of a stored object from `start`, as the answer's body: an iterable of chunks
    (WSGI streams it), read from the file opened now (an object replaced meanwhile is sent as it was
    when the request read its index row), so no body is ever whole in the server's memory."""

    def __init__(self, obj: StoredObject, start: int, length: int) -> None:
        self.length = length
        self._file = open(obj.path, "rb")  # noqa: SIM115 - closed when the body is sent (or dropped)
        self._file.seek(obj.offset + start)

    def __len__(self) -> int:
        return self.length

    def __iter__(self) -> Iterator[bytes]:
        try:
            left = self.length
            while left > 0:
                data = self._file.read(min(CHUNK, left))
                if not data:
                    return
                left -= len(data)
                yield data
        finally:
            self.close()

    def close(self) -> None:
        self._file.close()

    def __del__(self) -> None:
        self.close()


def _ranged_value(value: property, stored: Callable[[Any], bool], local: threading.local) -> property:
    """FakeKey.value: in a ranged GET (`local.ranged`), a stored object's StoredRange."""
    read_all = value.fget
    assert read_all is not None

    def fget(self: Any) -> Any:
        body = self.__dict__.get("_value_buffer")
        if getattr(local, "ranged", False) and stored(body):
            return StoredRange(body.obj)
        return read_all(self)

    return property(fget, value.fset, value.fdel, value.__doc__)


def _ranged_key_response(original: Callable[..., Any], local: threading.local) -> Callable[..., Any]:
    """S3Response.key_response: a GET with a Range header slices a StoredRange; what moto did not
    slice (a 200 for a range it does not serve, partNumber) is read whole."""
    def method(self: Any, request: Any, full_url: str, headers: Any) -> Any:
        local.ranged = request.method == "GET" and bool(request.headers.get("range"))
        try:
            result = original(self, request, full_url, headers)
        finally:
            local.ranged = False
        if isinstance(result, tuple) and len(result) == 3 and isinstance(result[2], StoredRange):
            status, answer_headers, body = result
            result = (status, answer_headers, body.whole())
        return result

    return method


def install_ranges(stored: Callable[[Any], bool], local: threading.local) -> None:
    """Patch moto (once per process): `stored(body)` says whether a FakeKey's `_value_buffer` is a
    stored object's (with its `obj`); `local` is the per-request state (`ranged`)."""
    from moto.s3.models import FakeKey
    from moto.s3.responses import S3Response

    value = inspect.getattr_static(FakeKey, "value")
    setattr(FakeKey, "value", _ranged_value(value, stored, local))  # noqa: B010
    setattr(S3Response, "key_response", _ranged_key_response(S3Response.key_response, local))  # noqa: B010
