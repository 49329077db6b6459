"""sdlocal's training records: what the hook observes beside the tensors (parameter checksums per
worker, which parameters the optimizers hold, the model's mode at each forward, the gradients'
state before backward, input batch fingerprints), for the rules that judge how a training is run
(evaluator/rules/replica_divergence.py and its siblings; docs/rules-beyond-debugger.md).

Stored in the trial as a sidecar that smdebug's readers never look at: `records/<worker>/<name>.jsonl`
beside `index/`, `events/` and `collections/` (smdebug lists only those and the end marker). Each
file is written once (`.tmp` + rename, so the uploader and readers only see whole files) and holds
one JSON object per line: a `layout` line when the parameters, their `requires_grad` flags or the
optimizers' parameters change, then one `step` line per recorded step (keys in `record_line`'s
callers: hook/records.py). Every worker writes its own folder, also under `include_workers=one`
(records are small), so rules can compare the workers of a distributed job.
"""
from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

RECORDS_PREFIX = "records/"
# The collection whose presence in the hook configuration turns records on; its save config is
# the records' schedule (the rules that read records name it as their default collection).
RECORDS_COLLECTION = "sdlocal_records"


def write_chunk(root: str | Path, worker: str, first_step: int, lines: Iterable[Mapping[str, Any]]) -> Path:
    """Write one records file for `worker` under the trial folder `root` (atomic: `.tmp` + rename).
    Names sort by first step; a random suffix keeps two hooks of one process apart."""
    folder = Path(root) / RECORDS_PREFIX / worker
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{max(first_step, 0):010d}_{uuid.uuid4().hex[:8]}.jsonl"
    tmp = path.with_name(path.name + ".tmp")
    data = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)
    tmp.write_text(data, encoding="utf-8")
    os.replace(tmp, path)
    return path


class RecordReader:
    """Reads a trial's records incrementally through its storage (local or S3): `poll()` returns the
    lines of the files that appeared since the last poll, as (worker, line) pairs, per worker in
    file order. A line that is not JSON is skipped (a file cut short by a crash)."""

    def __init__(self, storage: Any) -> None:
        self.storage = storage
        self._read: set[str] = set()
        self.seen_any = False

    def poll(self) -> list[tuple[str, dict[str, Any]]]:
        keys = [k for k in self.storage.list(RECORDS_PREFIX)
                if k.endswith(".jsonl") and k not in self._read]
        out: list[tuple[str, dict[str, Any]]] = []
        self.seen_any = self.seen_any or bool(keys)
        for key in sorted(keys):
            parts = key.split("/")
            if len(parts) != 3:
                continue
            self._read.add(key)
            text = bytes(self.storage.read(key)).decode("utf-8", errors="replace")
            for raw in text.splitlines():
                try:
                    line = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(line, dict):
                    out.append((parts[1], line))
        return out
