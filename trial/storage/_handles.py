"""Read-only file descriptors kept open between ranged reads of a local trial.

Reading a small tensor is one `pread`; opening and closing its events file around it would cost
several times more. A trial's readers go over its events files either step by step (rules) or
tensor by tensor, cycling through every file (reading all values): with a bounded cache, evicting
the least recently used descriptor would then miss on every read, so the descriptor opened last is
the one replaced, and the others stay open for good (a cyclic reader then hits capacity/files of
the time, a step-by-step one nearly always). Large reads do not use the cache: an open costs
nothing next to them, and they run without holding the lock.
"""
from __future__ import annotations

import os
import threading
import weakref
from typing import Any

try:
    import resource
except ImportError:  # not on Windows
    resource = None  # type: ignore[assignment]

MAX_HANDLES = 256
UNCACHED_READ_BYTES = 1 << 20  # reads from this size on open their own descriptor
_HAS_PREADV = hasattr(os, "preadv")


def default_capacity() -> int:
    """MAX_HANDLES, or an eighth of the process's descriptor limit when that is lower."""
    if resource is None:
        return 0
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return 0
    if soft == resource.RLIM_INFINITY:
        return MAX_HANDLES
    return max(0, min(MAX_HANDLES, soft // 8))


def _close_all(fds: dict[str, int]) -> None:
    for fd in fds.values():
        try:
            os.close(fd)
        except OSError:
            pass
    fds.clear()


def _read_fully(fd: int, buf: Any, size: int, offset: int) -> int:
    """pread into `buf` (`size` bytes) until it is full or the file ends; the bytes read. One
    call nearly always does it (Linux caps one read at 2 GiB - 4 KiB; a signal can cut one short)."""
    total = os.preadv(fd, [buf], offset)
    if total == 0 or total >= size:
        return total
    view = memoryview(buf).cast("B")
    while total < size:
        got = os.preadv(fd, [view[total:]], offset + total)
        if got == 0:
            break
        total += got
    return total


class FileHandles:
    def __init__(self, capacity: int | None = None) -> None:
        self.capacity = default_capacity() if capacity is None else capacity
        self._fds: dict[str, int] = {}  # path -> descriptor, in the order they were opened
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _close_all, self._fds)

    def read_into(self, path: str, buf: Any, size: int, offset: int) -> int:
        """Fill `buf`, a writable buffer of `size` bytes, from `path` at `offset`; the number of
        bytes read (fewer at the end of the file). Raises FileNotFoundError for a missing file,
        OSError for others."""
        if not _HAS_PREADV:
            with open(path, "rb") as f:
                f.seek(offset)
                return f.readinto(buf) or 0
        if self.capacity <= 0 or size >= UNCACHED_READ_BYTES:
            fd = os.open(path, os.O_RDONLY)
            try:
                return _read_fully(fd, buf, size, offset)
            finally:
                os.close(fd)
        with self._lock:  # held across the pread: no descriptor is closed while in use
            cached = self._fds.get(path)
            if cached is None:
                cached = os.open(path, os.O_RDONLY)
                if len(self._fds) >= self.capacity:
                    os.close(self._fds.popitem()[1])
                self._fds[path] = cached
            return _read_fully(cached, buf, size, offset)

    def close(self) -> None:
        with self._lock:
            _close_all(self._fds)

    def __len__(self) -> int:
        return len(self._fds)
