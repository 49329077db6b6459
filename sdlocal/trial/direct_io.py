"""Direct writes of large step files: O_DIRECT, from page-aligned memory, past the page cache.

Why: a buffered write of a new 8.4 MB step file into an ext4 folder cost the writer 9-18 ms of CPU
on this project's VM (the kernel filling fresh page-cache pages, then its flusher writing them
back), and 0.4-0.5 ms as one O_DIRECT write (the device copies from the buffer itself); on tmpfs
a buffered write cost 3.4 ms. A step's records are copied (one memcpy, numpy, the GIL released)
into a page-aligned buffer reused for every file, written in one `write` rounded up to whole
4 KiB blocks, and the file cut back to its length. The file is a `.tmp` renamed by the caller,
so no reader sees the rounded length.

Where (`SDLOCAL_DIRECT_WRITES`): `auto` (default) on the file systems where O_DIRECT bypasses a
page cache (ext4, xfs, btrfs, f2fs, ext3; overlay, whose upper layer is one of them in a
container), never on tmpfs (its pages are the file: the copy would only be added); `1` on every
file system that accepts it; `0` never. A file system that refuses O_DIRECT (EINVAL) is written
buffered from then on. Readers see the same bytes either way: a later buffered read of the file
(the launcher's upload, a rule) reads it from the disk instead of from memory.
"""
from __future__ import annotations

import errno
import mmap
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

DIRECT_WRITES_ENV = "SDLOCAL_DIRECT_WRITES"
DIRECT_MIN_BYTES = 1 << 20  # smaller files are written buffered (one block's rounding is not worth it)
BLOCK = 4096  # alignment of the buffer, the offset and the length (any device's logical block divides it)
DIRECT_FS = frozenset({"ext4", "ext3", "xfs", "btrfs", "f2fs", "overlay"})
_O_DIRECT = getattr(os, "O_DIRECT", 0)


def mode_from_env() -> str:
    mode = os.environ.get(DIRECT_WRITES_ENV, "auto").strip().lower() or "auto"
    return mode if mode in ("auto", "0", "1") else "auto"


def fs_type(path: Path, mountinfo: str | None = None) -> str | None:
    """The file system type of the mount holding `path` (/proc/self/mountinfo, or the text given),
    None if unknown."""
    target = os.path.realpath(path)
    if mountinfo is None:
        try:
            with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
                mountinfo = f.read()
        except OSError:
            return None
    lines = mountinfo.splitlines()
    best, best_type = "", None
    for line in lines:
        fields = line.split(" ")
        try:
            mount_point = fields[4].encode("latin-1").decode("unicode_escape")  # \040 for a space
            fstype = fields[fields.index("-", 6) + 1]
        except (IndexError, ValueError, UnicodeError):
            continue
        inside = target == mount_point or target.startswith(mount_point.rstrip("/") + "/")
        if inside and len(mount_point) >= len(best):
            best, best_type = mount_point, fstype
    return best_type


def open_new(path: Path, flags: int = 0) -> int:
    """A descriptor of `path`, created (or emptied) for writing with `flags` added; its folder is
    made where missing (a step's own events folder is new, or was removed)."""
    mode = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | flags
    try:
        return os.open(path, mode, 0o666)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, mode, 0o666)


def _device(folder: Path) -> int | None:
    """st_dev of `folder`, or of its nearest existing parent (a trial folder not made yet)."""
    for f in (folder, *folder.parents):
        try:
            return os.stat(f).st_dev
        except FileNotFoundError:
            continue
        except OSError:
            return None
    return None


class DirectWriter:
    """Writes large files with O_DIRECT where `mode` allows (see the module's docstring); one per
    TrialWriter (its buffer, as large as the largest file so far, is not shared between threads and
    lives as long as the writer)."""

    def __init__(self, mode: str | None = None) -> None:
        self.mode = mode_from_env() if mode is None else mode
        self._verdicts: dict[int, bool] = {}  # st_dev of a folder -> direct writes there
        self._dev = -1  # that of the folder of the last `wanted` (where `write` writes)
        self._buffer: mmap.mmap | None = None

    def wanted(self, folder: Path, size: int) -> bool:
        if self.mode == "0" or not _O_DIRECT or size < DIRECT_MIN_BYTES:
            return False
        dev = _device(folder)
        if dev is None:
            return False
        self._dev = dev
        verdict = self._verdicts.get(dev)
        if verdict is None:
            verdict = self.mode == "1" or fs_type(folder) in DIRECT_FS
            self._verdicts[dev] = verdict
        return verdict

    def write(self, tmp: Path, parts: Sequence[bytes | memoryview], size: int) -> bool:
        """Write `parts` (`size` bytes in all) as the new file `tmp`, in the folder of the last
        `wanted`; False (nothing written, no file left) where the file system refuses O_DIRECT
        (remembered): the caller writes it buffered."""
        try:
            fd = open_new(tmp, _O_DIRECT)
        except OSError as e:
            if e.errno != errno.EINVAL:
                raise
            self._verdicts[self._dev] = False
            return False
        try:
            padded = -(-size // BLOCK) * BLOCK
            buf = self._take(padded)
            view = np.frombuffer(buf, dtype=np.uint8, count=padded)
            pos = 0
            for part in parts:
                n = len(part) if isinstance(part, bytes) else part.nbytes
                view[pos:pos + n] = np.frombuffer(part, dtype=np.uint8, count=n)  # a memcpy without the GIL
                pos += n
            view[pos:padded] = 0
            del view
            done = 0
            while done < padded:
                try:
                    n = os.write(fd, memoryview(buf)[done:padded])
                except OSError as e:
                    if e.errno != errno.EINVAL or done:
                        raise
                    self._verdicts[self._dev] = False
                    os.close(fd)
                    fd = -1
                    os.unlink(tmp)
                    return False
                if n <= 0:
                    raise OSError(f"write wrote nothing of {padded - done} bytes to {tmp}")
                if n % BLOCK:  # a short write off the block grid (a full disk's end): no direct write goes on from there
                    raise OSError(errno.ENOSPC, f"short direct write ({done + n} of {padded} bytes)", str(tmp))
                done += n
            os.ftruncate(fd, size)
        finally:
            if fd >= 0:
                os.close(fd)
        return True

    def _take(self, size: int) -> mmap.mmap:
        if self._buffer is None or len(self._buffer) < size:
            if self._buffer is not None:
                self._buffer.close()
            self._buffer = mmap.mmap(-1, size)  # anonymous memory: page-aligned
        return self._buffer
