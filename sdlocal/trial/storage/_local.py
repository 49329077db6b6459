"""A trial in a local directory."""
from __future__ import annotations

import mmap
import os
import sys
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from sdlocal.trial.errors import StorageError
from sdlocal.trial.storage._base import Storage
from sdlocal.trial.storage._handles import SHARED, FileHandles, new_owner, open_regular

_ALIGNMENT = 64  # numpy aligns its own allocations to 16 (64 with huge pages); cache lines are 64
# madvise(MADV_POPULATE_READ) (Linux 5.14+; Python 3.11's mmap has no name for it): maps every page
# of a file mapping from the page cache in one call, read-only (no copy-on-write copy is made), so
# a mapped value's pages are in place when it is handed out rather than faulted in one by one at
# its first use; elsewhere the pages are mapped at first touch.
_MADV_POPULATE_READ = getattr(mmap, "MADV_POPULATE_READ", 22 if sys.platform.startswith("linux") else None)


class LocalStorage(Storage):
    """`handles`: the descriptors ranged reads go through (default: the process's shared set)."""

    fills_own_buffers = True
    maps_files = True

    def __init__(self, root: str | Path, handles: FileHandles | None = None) -> None:
        self.root = Path(root)
        self._root_str = str(self.root)
        self._handles = SHARED if handles is None else handles
        self._owner = new_owner()
        # this storage's descriptors go back when it is collected (a Trial in a cycle: by the GC)
        weakref.finalize(self, self._handles.owner_gone, self._owner)

    @property
    def uri(self) -> str:
        return self._root_str

    def _path(self, key: str) -> Path:
        return self.root / key

    def read(self, key: str, start: int | None = None, length: int | None = None) -> bytes:
        path = self._root_str + "/" + key  # not Path: opening a trial reads every index file
        try:
            with os.fdopen(open_regular(path), "rb") as f:
                if start:
                    f.seek(start)
                return f.read() if length is None else f.read(length)
        except FileNotFoundError:
            raise
        except OSError as e:
            raise StorageError(f"cannot read {path}: {e}") from e

    def read_range(self, key: str, start: int, length: int, aligned_at: int | None = None,
                   locate: Callable[[memoryview], int | None] | None = None) -> memoryview:
        """Fills a buffer of our own (np.empty: no zero-fill pass over memory about to be
        overwritten) through a descriptor kept open for the next read of the same file (see
        _handles.py); a short file gives a shorter view, which the caller reports. (`locate` is
        not used: a small read costs little here, the caller reads the head first.)"""
        buf: Any
        if aligned_at is None:
            buf = np.empty(length, dtype=np.uint8)
        else:
            raw = np.empty(length + _ALIGNMENT, dtype=np.uint8)
            shift = -(raw.__array_interface__["data"][0] + aligned_at) % _ALIGNMENT
            buf = raw[shift: shift + length]
        path = self._root_str + "/" + key  # keys use "/"; cheaper than os.path.join
        try:
            got = self._handles.read_into(self._owner, path, buf, length, start)
        except FileNotFoundError:
            raise
        except OSError as e:
            raise StorageError(f"cannot read {path}: {e}") from e
        view = memoryview(buf)
        return view if got == length else view[:got]

    def map_range(self, key: str, start: int, length: int) -> memoryview | None:
        """A private (copy-on-write) mapping of the range: a value over it costs no fresh memory
        and no copy, and stays correct and independent: each call maps anew, a write to it copies
        the page for this mapping only (never the file, never another value), and trial files are
        replaced by rename, never rewritten in place, so the mapped bytes cannot change. (A file
        truncated in place under a live mapping would make reading its pages fail with SIGBUS:
        neither our writer nor smdebug's does that.) None when the range is not all in the file or
        the file system cannot map it: the caller reads instead."""
        path = self._root_str + "/" + key
        try:
            fd = open_regular(path)
        except FileNotFoundError:
            raise
        except OSError as e:
            raise StorageError(f"cannot read {path}: {e}") from e
        try:
            if start + length > os.fstat(fd).st_size:
                return None
            base = start - start % mmap.ALLOCATIONGRANULARITY
            mapped = mmap.mmap(fd, start + length - base, access=mmap.ACCESS_COPY, offset=base)
        except (OSError, ValueError):
            return None
        finally:
            os.close(fd)
        if _MADV_POPULATE_READ is not None:
            first_page = (start - base) - (start - base) % mmap.PAGESIZE  # madvise takes page-aligned starts
            try:
                mapped.madvise(_MADV_POPULATE_READ, first_page, start + length - base - first_page)
            except (OSError, ValueError):
                pass  # an older kernel: the pages are mapped at first touch instead
        return memoryview(mapped)[start - base:]

    def close(self) -> None:
        """Close the descriptors kept open for reading files of this trial (optional: they are
        bounded per process, and closed when the storage is collected)."""
        self._handles.forget_owner(self._owner, self._root_str)

    def write(self, key: str, data: bytes) -> None:
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".tmp")
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except OSError as e:
            raise StorageError(f"cannot write {path}: {e}") from e
        self._handles.forget(self._root_str + "/" + key)  # a kept descriptor reads the old file

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def list(self, prefix: str = "", start_after: str | None = None, *, include_tmp: bool = False) -> list[str]:
        # Walk only the folders that can hold keys with this prefix.
        folder, _, _ = prefix.rpartition("/")
        base = self.root / folder if folder else self.root
        if not base.is_dir():
            return []
        keys = []
        root_str = str(self.root)
        cut = len(root_str) + 1
        for dirpath, _dirs, files in os.walk(base):
            rel_dir = dirpath[cut:].replace(os.sep, "/") if len(dirpath) > len(root_str) else ""
            if start_after is not None and rel_dir and not _may_hold_after(rel_dir, start_after):
                _dirs[:] = []
                continue
            _dirs.sort()
            for name in files:
                if name.endswith(".tmp") and not include_tmp:
                    continue
                key = f"{rel_dir}/{name}" if rel_dir else name
                if key.startswith(prefix) and (start_after is None or key > start_after):
                    keys.append(key)
        keys.sort()
        return keys

    def delete(self, key: str) -> None:
        try:
            self._path(key).unlink()
        except FileNotFoundError:
            pass
        except OSError as e:
            raise StorageError(f"cannot delete {key}: {e}") from e
        self._handles.forget(self._root_str + "/" + key)


def _may_hold_after(rel_dir: str, start_after: str) -> bool:
    """Whether a folder can contain a key > start_after (prunes old step folders on refresh)."""
    return rel_dir + "/\U0010ffff" > start_after
