"""Whole small events files kept in memory by a trial, for readers of many small values.

A small value costs one ranged read of its record: a `pread` locally, a GET on S3 (about 2 ms of
a moto server's time, more on a real one). A rule that reads every gradient of a step, or a
notebook that reads every value of every tensor, reads each step file many times over, one record
at a time. From the second record read out of the same events file on, the trial reads that file
whole, once, and serves its small records from memory: one GET per step file instead of one per
tensor, and no system call per value locally.

What is kept: files up to MAX_FILE_BYTES (the index says how far a file's records reach), while
the trial holds at most BUDGET_BYTES of them (32 MiB: a rule's evaluator that follows a long job
keeps no more than that). A file read only once (a rule that reads the loss
alone) is never fetched whole. Events files are written once and renamed into place by both
writers, never rewritten, so a file's bytes cannot change while they are kept. The bytes are
read-only: every value is decoded from them into memory of its own (`_decode.record_value` copies
from a read-only buffer), so a caller that modifies a value changes neither the kept file nor any
other value.

When the budget is full, the newest file makes room for the next (one time in RANDOM_EVICTION a
random one): a reader going tensor by tensor cycles through every step file, and on a cycle longer
than the budget this keeps most files for the next cycle (trial/storage/_handles.py explains the
same choice for file descriptors).
"""
from __future__ import annotations

import random
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sdlocal.trial.storage import Storage

MAX_FILE_BYTES = 1 << 20
BUDGET_BYTES = 32 << 20  # per trial: an evaluator following a long job holds at most this much
MAX_TOUCHED = 1 << 16  # files remembered as read from once (forgotten all at once beyond this)
SMALL_RECORD_BYTES = 64 << 10  # records below this size are served from kept files
RANDOM_EVICTION = 8


class FileCache:
    def __init__(self, budget: int = BUDGET_BYTES) -> None:
        self.budget = budget
        self.held = 0
        self._files: dict[str, memoryview] = {}
        self._touched: set[str] = set()
        self._evictions = 0
        self._lock = threading.Lock()  # around changes: a trial may be read from several threads

    def get(self, storage: Storage, key: str, size: int) -> memoryview | None:
        """The first `size` bytes of `key` (read-only; shorter if the file is), or None where the
        caller should read its record on its own: the file is too large, or read only once so far."""
        data = self._files.get(key)
        if data is not None and len(data) >= size:
            return data
        if data is not None:  # the index now reaches further into it (or it was short): read again
            self.drop(key)
        if size > MAX_FILE_BYTES or size > self.budget:
            return None
        if key not in self._touched:
            with self._lock:
                if len(self._touched) >= MAX_TOUCHED:
                    self._touched.clear()
                self._touched.add(key)
            return None
        data = storage.read_range(key, 0, size).toreadonly()
        self._keep(key, data)
        return data

    def _keep(self, key: str, data: memoryview) -> None:
        with self._lock:
            self._pop(key)
            while self._files and self.held + len(data) > self.budget:
                self._evictions += 1
                victim = (random.choice(list(self._files)) if self._evictions % RANDOM_EVICTION == 0
                          else next(reversed(self._files)))
                self._pop(victim)
            self._files[key] = data
            self.held += len(data)

    def drop(self, key: str) -> None:
        with self._lock:
            self._pop(key)

    def _pop(self, key: str) -> None:
        data = self._files.pop(key, None)
        if data is not None:
            self.held -= len(data)

