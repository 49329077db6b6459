"""TrialWriter: writes a local trial in smdebug's layout (trial-format.md §1-§5)."""
from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from sdlocal.trial.collection import Collection, CollectionsFile
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
    parts = [data] if isinstance(data, bytes) else [p if isinstance(p, memoryview) else memoryview(p) for p in data]
    parts = [p.cast("B") if isinstance(p, memoryview) and (p.ndim != 1 or p.format != "B") else p for p in parts]
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


def _atomic_write(path: Path, data: bytes | Sequence[bytes | memoryview], tmp_name: str | None = None) -> None:
    """Write `data` (bytes, or parts written one after the other) to `path.tmp` (or `tmp_name` beside
    it: a file several writers write), then rename."""
    tmp = path.with_name(tmp_name or path.name + ".tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
    except FileNotFoundError:  # the folder is new (a step's own events folder) or was removed
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)


class TrialWriter:
    """Writes one worker's files of a LOCAL trial. Each `write_step` writes the events file, then
    its index file (both `.tmp` + rename), so a reader that sees the index can read the events."""

    def __init__(self, root: str | Path, worker: str = "worker_0") -> None:
        self.root = Path(root)
        self.worker = worker

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
            _atomic_write(self.root / ev_key, parts)
        index = {"meta": meta, "tensor_payload": payload_index, "shape_payload": shape_payload}
        idx_path = self.root / index_key(step, self.worker)
        _atomic_write(idx_path, json.dumps(index).encode())
        return idx_path

    def write_collections(self, collections: Iterable[Collection], num_workers: int = 1) -> Path:
        path = self.root / collections_key(self.worker)
        _atomic_write(path, CollectionsFile.of(collections, num_workers).to_json().encode())
        return path

    def write_end_marker(self) -> Path:
        path = self.root / END_MARKER
        # every worker of a folder writes it (smdebug's include_workers=all): each its own temporary
        _atomic_write(path, b"", tmp_name=f"{END_MARKER}.{self.worker}.tmp")
        return path
