"""The rules' statuses, kept by the launcher while the job runs: `KeptStatus` is a rule-output
storage through which the launcher reads and writes `status.json`; it remembers the last status it
saw or wrote and, when S3 lost it (an endpoint restarted empty), puts it back. The uploader polls
each keeper every tick (one GET per rule), so what the launcher has seen is at most a tick old.

Putting back uses S3's conditional PUT (If-None-Match: *): an evaluator that wrote a newer status
meanwhile keeps it. What no keeper saw cannot be put back: a status written less than a tick before
the endpoint lost its data, by an evaluator that exited since (its status then reads Error, "exited
without a final status"). The embedded S3 keeps its data across restarts, so this concerns an
external endpoint without persistence only.
"""
from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path

from sdlocal.trial.storage import S3Storage, Storage

STATUS_KEY = "status.json"


class KeptStatus(Storage):
    def __init__(self, inner: Storage) -> None:
        self.inner = inner
        self._last: bytes | None = None
        self._lock = threading.Lock()
        self.restored = 0

    @property
    def uri(self) -> str:
        return self.inner.uri

    @property
    def last(self) -> bytes | None:
        return self._last

    def poll(self) -> None:
        """Look at the status (the uploader's tick): remembered, or put back if it is gone."""
        try:
            self.read(STATUS_KEY)
        except FileNotFoundError:
            pass

    def read(self, key: str, start: int | None = None, length: int | None = None) -> bytes:
        if key != STATUS_KEY or start is not None or length is not None:
            return self.inner.read(key, start, length)
        try:
            data = self.inner.read(key)
        except FileNotFoundError:
            with self._lock:
                last = self._last
            if last is None:
                raise
            if isinstance(self.inner, S3Storage):
                self.inner.write(key, last, if_absent=True)  # an evaluator's newer status wins
            else:
                self.inner.write(key, last)
            self.restored += 1
            data = self.inner.read(key)
        with self._lock:
            self._last = data
        return data

    def write(self, key: str, data: bytes) -> None:
        self.inner.write(key, data)
        if key == STATUS_KEY:
            with self._lock:
                self._last = data

    def exists(self, key: str) -> bool:
        if key == STATUS_KEY:
            try:
                self.read(key)
            except FileNotFoundError:
                return False
            return True
        return self.inner.exists(key)

    def list(self, prefix: str = "", start_after: str | None = None, *, include_tmp: bool = False) -> list[str]:
        return self.inner.list(prefix, start_after, include_tmp=include_tmp)

    def delete(self, key: str) -> None:
        self.inner.delete(key)

    def write_file(self, key: str, path: str | Path) -> None:
        self.inner.write_file(key, path)

    def delete_many(self, keys: Iterable[str]) -> None:
        self.inner.delete_many(keys)
