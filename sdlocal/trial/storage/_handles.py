"""Read-only file descriptors kept open between ranged reads of local trials.

Reading a small tensor is one `pread`; opening and closing its events file around it would cost
several times more. The descriptors live in one set per process (`SHARED`), bounded in number,
each kept for one owner (a LocalStorage, so a trial): trials often end up in reference cycles (a
Tensor points to its Trial), so a set per trial would hold its descriptors until the cyclic
garbage collector runs, and a process opening many trials would pile them up; and an owner never
reads through a descriptor another one opened (see FileHandles).

Which descriptor makes room for a new one: a reader of a trial goes over its events files either
step by step (rules: any policy keeps the current file) or tensor by tensor, cycling through every
file (reading all values). On a cycle longer than the capacity, evicting the least recently (or
first) opened descriptor misses on every read, and a random one on most (70% of the reads for a
capacity of 60% of the files, simulated). So the descriptor opened last makes room, which keeps
the others for the next cycle (capacity/files of the reads hit), except one time in RANDOM_EVICTION
where a random one does, so that files nobody reads any more (an earlier trial's) do not keep
their descriptors for good. Large reads do not use the cache: an open costs nothing next to them,
and they run without holding the lock.
"""
from __future__ import annotations

import itertools
import os
import random
import stat
import threading
from collections.abc import Callable
from typing import Any

try:
    import resource
except ImportError:  # not on Windows
    resource = None  # type: ignore[assignment]

MAX_HANDLES = 512
UNCACHED_READ_BYTES = 1 << 20  # reads from this size on open their own descriptor
RANDOM_EVICTION = 8  # one eviction in this many picks a random descriptor, the others the newest
_HAS_PREADV = hasattr(os, "preadv")



def open_regular(path: str) -> int:
    """A read-only descriptor of `path`, which must be a regular file: a FIFO would block the
    reader forever (opened without blocking here), a device never ends."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        mode = os.fstat(fd).st_mode
    except BaseException:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise OSError("not a regular file (a FIFO, a device or a socket); refused")
    return fd

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
    """Descriptors keyed by (owner, path): each LocalStorage (so each trial) is an owner and
    never reads through a descriptor another one opened. A trial opened on a directory that was
    wiped and written again (a job run again under the same name) must not read the files an
    earlier trial of this process kept open, which are the old ones; and an owner that is gone
    gives its descriptors back (`forget_owner`)."""

    def __init__(self, capacity: int | None = None, seed: int | None = None) -> None:
        self.capacity = default_capacity() if capacity is None else capacity
        self._fds: dict[tuple[int, str], int] = {}
        self._keys: list[tuple[int, str]] = []  # the keys of _fds, for an O(1) random pick
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._gone: list[int] = []  # owners collected since: their descriptors go at the next open
        self.opened = 0  # descriptors opened for the cache, ever (what the policy is judged by)

    def read_into(self, owner: int, path: str, buf: Any, size: int, offset: int) -> int:
        """Fill `buf`, a writable buffer of `size` bytes, from `path` at `offset`; the number of
        bytes read (fewer at the end of the file). Raises FileNotFoundError for a missing file,
        OSError for others."""
        if not _HAS_PREADV:
            with os.fdopen(open_regular(path), "rb") as f:
                f.seek(offset)
                return f.readinto(buf) or 0
        if self.capacity <= 0 or size >= UNCACHED_READ_BYTES:
            fd = open_regular(path)
            try:
                return _read_fully(fd, buf, size, offset)
            finally:
                os.close(fd)
        key = (owner, path)
        with self._lock:  # held across the pread: no descriptor is closed while in use
            cached = self._fds.get(key)
            if cached is None:
                cached = self._open(key)
            got = os.preadv(cached, [buf], offset)
            return got if got == size or got == 0 else _read_fully(cached, buf, size, offset)

    def _open(self, key: tuple[int, str]) -> int:
        """Open key's path into the cache, making room first (the lock held)."""
        fd = open_regular(key[1])
        self.opened += 1
        if self._gone:
            gone = set()
            while self._gone:  # pop, not clear: a finalizer may append meanwhile
                gone.add(self._gone.pop())
            for slot in range(len(self._keys) - 1, -1, -1):
                if self._keys[slot][0] in gone:
                    self._evict(slot)
        if len(self._keys) >= self.capacity:
            rng = self._random
            newest = len(self._keys) - 1
            self._evict(rng.randrange(newest + 1) if rng.randrange(RANDOM_EVICTION) == 0 else newest)
        self._fds[key] = fd
        self._keys.append(key)
        return fd

    def _evict(self, slot: int) -> None:
        """Close the descriptor of _keys[slot] (the lock held)."""
        keys = self._keys
        key = keys[slot]
        keys[slot] = keys[-1]
        keys.pop()
        os.close(self._fds.pop(key))

    def _evict_where(self, pick: Callable[[tuple[int, str]], bool]) -> None:
        with self._lock:
            for key in [k for k in self._keys if pick(k)]:
                self._evict(self._keys.index(key))

    def forget(self, path: str) -> None:
        """Close every descriptor kept for `path`, whoever opened it (it is being replaced or removed)."""
        if self._keys:
            self._evict_where(lambda key: key[1] == path)

    def forget_owner(self, owner: int, folder: str = "") -> None:
        """Close the descriptors `owner` opened (under `folder`, when given)."""
        prefix = folder.rstrip(os.sep) + os.sep if folder else ""
        if self._keys:
            self._evict_where(lambda key: key[0] == owner and key[1].startswith(prefix))

    def owner_gone(self, owner: int) -> None:
        """`owner` was collected. Called from a weakref finalizer, so possibly by the GC while this
        very thread holds the lock (inside read_into): takes no lock, only notes it for later."""
        self._gone.append(owner)

    def close(self) -> None:
        with self._lock:
            while self._keys:
                self._evict(len(self._keys) - 1)

    def _after_fork(self) -> None:
        # A thread of the parent may have held the lock when it forked: the child gets a new one
        # (and keeps the descriptors, which pread shares safely: it moves no file offset).
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._fds)


SHARED = FileHandles()
_owners = itertools.count(1)


def new_owner() -> int:
    """A token no other user of the handles has."""
    return next(_owners)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=SHARED._after_fork)
