"""TrialWriter: writes a local trial in smdebug's layout (trial-format.md §1-§5)."""
from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Iterable, Sequence
from pathlib import Path

from sdlocal.trial.collection import Collection, CollectionsFile
from sdlocal.trial.direct_io import DirectWriter, open_new
from sdlocal.trial.modes import ModeKeys, to_mode
from sdlocal.trial.proto import encode_event_parts
from sdlocal.trial.tfrecord import FOOTER, encode_header

# the end marker: written when training ended (the platform writes it after the final upload, also
# when training failed); the one spelling of the name for every layer (trial, evaluator, launcher)
END_MARKER = "training_job_end.ts"


def event_key(step: int, worker: str) -> str:
    return f"events/{step:012d}/{step:012d}_{worker}.tfevents"


def index_key(step: int, worker: str) -> str:
    return f"index/{step // 1000:09d}/{step:012d}_{worker}.json"


def collections_key(worker: str) -> str:
    return f"collections/000000000/{worker}_collections.json"


_IOV_MAX = 1024  # parts per writev call (Linux's IOV_MAX)


def _write_all(fd: int, data: bytes | Sequence[bytes | memoryview]) -> None:
    """Every byte of `data` (bytes, or parts one after the other) to `fd`: parts in writev calls of
    up to _IOV_MAX (one call per step's file, where buffered writelines made one write per large part
    and one per run of small ones), large parts straight from the arrays' memory, without the GIL."""
    given: Sequence[bytes | memoryview] = [data] if isinstance(data, bytes) else data
    parts: list[bytes | memoryview] = [
        p.cast("B") if isinstance(p, memoryview) and (p.ndim != 1 or p.format != "B") else p for p in given]
    while parts:
        batch = parts[:_IOV_MAX]
        written = os.writev(fd, batch)
        if not written and any(len(p) for p in batch):
            raise OSError(f"writev wrote nothing of {sum(len(p) for p in batch)} bytes")
        # a short write (a signal, a full disk's last bytes): go on from where it stopped
        while batch and written >= len(batch[0]):
            written -= len(batch[0])
            batch.pop(0)
            parts.pop(0)
        if written:
            parts[0] = memoryview(parts[0])[written:]


# Drop-behind of large step files (TrialWriter(drop_behind=True)): the page cache's pages of a
# step file are given back once written (and a few steps old), so that the next steps' files
# reuse them. On an
# ext4 output folder (this VM, kernel 6.18), writing 8.4 MB into a new file cost 16-18 ms of the
# writer's CPU while the page cache grew, 1.9-2.2 ms with drop-behind (200 files, measured alone).
# A reader of the step (a rule, live) then reads it from the disk rather than from memory.
DROP_BEHIND_BYTES = 1 << 20  # smaller files are left alone
DROP_BEHIND_LAG = 4  # the files of this many later steps are written before a file's pages are dropped
# Off unless SDLOCAL_DROP_BEHIND=1 (or TrialWriter(drop_behind=True)), and only for files not written
# direct (direct_io.py: O_DIRECT on a disk's file system leaves no page cache to drop, at less CPU).
# Waiting until a file is 2 s old (so that the upload finds it in memory) lost the gain and more:
# interval 1 on ext4 +27% CPU against main, the write-back started for nothing.
DROP_BEHIND_ENV = "SDLOCAL_DROP_BEHIND"
_FADVISE = getattr(os, "posix_fadvise", None)


def _drop_cached(fd: int) -> None:
    """Ask the kernel to write the file's dirty pages back now and drop its clean ones (a no-op on
    tmpfs, where the pages are the file; not where posix_fadvise is missing)."""
    if _FADVISE is not None:
        try:
            _FADVISE(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        except OSError:
            pass


def _drop_cached_path(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:  # gone (moved, uploaded and removed): nothing to drop
        return
    try:
        _drop_cached(fd)
    finally:
        os.close(fd)


def _atomic_write(path: Path, data: bytes | Sequence[bytes | memoryview], tmp_name: str | None = None,
                  drop: bool = False) -> None:
    """Write `data` (bytes, or parts written one after the other) to `path.tmp` (or `tmp_name` beside
    it: a file several writers write), then rename. `drop`: start its write-back at once (its pages
    are dropped once written back, by a later _drop_cached_path)."""
    tmp = path.with_name(tmp_name or path.name + ".tmp")
    fd = open_new(tmp)
    try:
        _write_all(fd, data)
        if drop:
            _drop_cached(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


class TrialWriter:
    """Writes one worker's files of a LOCAL trial. Each `write_step` writes the events file, then
    its index file (both `.tmp` + rename), so a reader that sees the index can read the events.
    `drop_behind` (None: SDLOCAL_DROP_BEHIND=1 in the environment): the page cache of step files of
    DROP_BEHIND_BYTES and more is given back once DROP_BEHIND_LAG later steps are written."""

    def __init__(self, root: str | Path, worker: str = "worker_0", drop_behind: bool | None = None) -> None:
        self.root = Path(root)
        self.worker = worker
        self.drop_behind = os.environ.get(DROP_BEHIND_ENV) == "1" if drop_behind is None else drop_behind
        self._behind: deque[Path] = deque()  # large step files written, oldest first
        self._direct = DirectWriter()  # large step files past the page cache (trial/direct_io.py)

    def write_step(
        self,
        step: int,
        mode: ModeKeys | int | str,
        mode_step: int,
        tensors: Iterable[tuple[str, object]],
        *,
        shapes: Iterable[tuple[str, Iterable[int]]] = (),
        wall_time: float | None = None,
    ) -> Path | None:
        """Write every tensor of one global step; returns the index file (None if nothing to write)."""
        mode_k = to_mode(mode)
        parts: list[bytes | memoryview] = []
        payload_index = []
        pos = 0
        for name, value in tensors:
            payload = encode_event_parts(name, value, step, mode_k, mode_step, wall_time)
            payload_len = sum(len(p) if isinstance(p, bytes) else p.nbytes for p in payload)
            header = encode_header(payload_len)
            parts.append(header)
            parts += payload
            parts.append(FOOTER)
            length = len(header) + payload_len + len(FOOTER)
            payload_index.append({"tensorname": name, "start_idx": pos, "length": length})
            pos += length
        shape_payload = [
            {"tensorname": name, "originalname": name, "shape": [int(d) for d in shape]} for name, shape in shapes
        ]
        if not payload_index and not shape_payload:
            return None
        ev_key = event_key(step, self.worker)
        meta: dict[str, object] = {"mode": mode_k.name, "mode_step": int(mode_step)}
        if payload_index:
            meta["event_file_name"] = ev_key
            drop = self.drop_behind and pos >= DROP_BEHIND_BYTES
            if self._direct.wanted(self.root, pos) and self._write_direct(self.root / ev_key, parts, pos):
                drop = False  # no page cache to drop
            else:
                _atomic_write(self.root / ev_key, parts, drop=drop)
            if drop:
                self._behind.append(self.root / ev_key)
                if len(self._behind) > DROP_BEHIND_LAG:
                    _drop_cached_path(self._behind.popleft())
        index = {"meta": meta, "tensor_payload": payload_index, "shape_payload": shape_payload}
        idx_path = self.root / index_key(step, self.worker)
        _atomic_write(idx_path, json.dumps(index).encode())
        return idx_path

    def _write_direct(self, path: Path, parts: Sequence[bytes | memoryview], size: int) -> bool:
        tmp = path.with_name(path.name + ".tmp")
        if not self._direct.write(tmp, parts, size):
            return False
        os.replace(tmp, path)
        return True

    def write_collections(self, collections: Iterable[Collection], num_workers: int = 1) -> Path:
        path = self.root / collections_key(self.worker)
        _atomic_write(path, CollectionsFile.of(collections, num_workers).to_json().encode())
        return path

    def write_end_marker(self) -> Path:
        path = self.root / END_MARKER
        # every worker of a folder writes it (smdebug's include_workers=all): each its own temporary
        _atomic_write(path, b"", tmp_name=f"{END_MARKER}.{self.worker}.tmp")
        return path
