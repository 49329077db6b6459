"""ProfilerReader: a job's `profiler-output/` (local folder or s3:// prefix), read incrementally.

    reader = ProfilerReader("s3://bucket/prefix/job/profiler-output", s3_client=client)
    reader.refresh()                 # lists only keys it has not read, reads each new file once
    cpu = reader.system.select(type="cpu", dimension="CPUUtilization", start_us=t0, end_us=t1)
    steps = reader.framework.steps(mode="TRAIN", start_us=t0, end_us=t1)
    reader.training_ended(); reader.loaded_all

Times are epoch microseconds, windows `[start_us, end_us)` (see `trial.profiler.data`).

Listing: each refresh lists `system/` and `framework/` after a key that trails the newest file read
by `trailing_s` (S3 `StartAfter`; the local walk prunes older hour folders), so a poll where
nothing changed costs two LISTs of a few keys and no GET. Trailing instead of starting after the
newest key because files can arrive out of order (two writers, an upload that lags), as smdebug's
reader does (its default: 5 minutes). Both end markers sort after the data keys of their prefix
(`system/training_job_end.ts` > `system/incremental/...`, `framework/training_job_end.ts` >
`framework/pevents/...`), so the same LISTs notice the end of training.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trial.profiler.data import FrameworkEvents, SystemMetrics
from trial.profiler.errors import Damage, ProfilerDataError
from trial.profiler.names import (
    FRAMEWORK_END_MARKER,
    FRAMEWORK_PREFIX,
    SYSTEM_END_MARKER,
    SYSTEM_PREFIX,
    parse_system_key,
    parse_trace_key,
)
from trial.profiler.parse import parse_system_file, parse_trace_file
from trial.storage import Storage, open_storage

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RefreshResult:
    files: int = 0  # new files read
    samples: int = 0  # new system samples
    events: int = 0  # new framework events
    damage: int = 0  # new damage reports
    partial_lines: int = 0  # damaged last lines skipped


class _Listing:
    """What one prefix has been read up to: keys seen, and file timestamps for the trailing key."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.seen: set[str] = set()
        self.read: list[tuple[int, str]] = []  # (file timestamp µs, key), in the order read
        self.start_after: str | None = None

    def advance(self, trailing_us: int) -> None:
        if not self.read:
            return
        newest = max(ts for ts, _ in self.read)
        old = [key for ts, key in self.read if ts <= newest - trailing_us]
        if old:
            self.start_after = max(old)
            # Forget what the listing can no longer return.
            self.read = [(ts, key) for ts, key in self.read if key > self.start_after]
            self.seen = {k for k in self.seen if k > self.start_after}


class ProfilerReader:
    def __init__(
        self,
        location: str | Path | Storage,
        *,
        s3_client: Any = None,
        endpoint_url: str | None = None,
        strict: bool = False,
        trailing_s: float = 300.0,
    ) -> None:
        self.storage = location if isinstance(location, Storage) else open_storage(
            location, client=s3_client, endpoint_url=endpoint_url)
        self.strict = strict
        self.trailing_us = int(trailing_s * 1_000_000)
        self.system = SystemMetrics()
        self.framework = FrameworkEvents()
        self.damage: list[Damage] = []
        self.partial_lines = 0
        self._system = _Listing(SYSTEM_PREFIX)
        self._framework = _Listing(FRAMEWORK_PREFIX)
        self._ended = False
        self._loaded_all = False

    def __repr__(self) -> str:
        return f"<ProfilerReader {self.storage.uri}>"

    @property
    def loaded_all(self) -> bool:
        """Training has ended and every file written before the end marker has been read."""
        return self._loaded_all

    def training_ended(self) -> bool:
        if not self._ended:
            self._ended = self.storage.exists(SYSTEM_END_MARKER) or self.storage.exists(FRAMEWORK_END_MARKER)
        return self._ended

    def refresh(self) -> RefreshResult:
        """Read the files that appeared since the last refresh."""
        total = self._refresh_once()
        if self._ended and not self._loaded_all:
            # The end marker is written after the last upload: one more pass sees every file.
            again = self._refresh_once()
            total = RefreshResult(*(a + b for a, b in zip(_fields(total), _fields(again), strict=True)))
            self._loaded_all = True
        return total

    # ---- internals -------------------------------------------------------------------------------
    def _refresh_once(self) -> RefreshResult:
        counts = [0, 0, 0, 0, 0]
        for listing in (self._system, self._framework):
            for key in self.storage.list(listing.prefix, start_after=listing.start_after):
                if key in listing.seen:
                    continue
                if key in (SYSTEM_END_MARKER, FRAMEWORK_END_MARKER):
                    self._ended = True
                    continue
                stamp = self._read_file(key, counts)
                if stamp is None:
                    continue
                listing.seen.add(key)
                if stamp >= 0:
                    listing.read.append((stamp, key))
            listing.advance(self.trailing_us)
        return RefreshResult(*counts)

    def _read_file(self, key: str, counts: list[int]) -> int | None:
        """Fold one file in; returns its name's timestamp (None: not a profiler file, or gone)."""
        sys_name = parse_system_key(key)
        trace_name = None if sys_name else parse_trace_key(key)
        if sys_name is None and trace_name is None:
            return -1  # another kind of file (TF detailed profiles, ...): remember, skip
        try:
            data = self.storage.read(key)
        except FileNotFoundError:
            return None  # deleted between LIST and GET
        if sys_name is not None:
            parsed = parse_system_file(data, key)
            counts[1] += self.system.add(parsed.records)
            stamp = sys_name.start_us
        else:
            assert trace_name is not None
            parsed = parse_trace_file(data, key, trace_name.node_id)
            counts[2] += self.framework.add(parsed.records)
            stamp = trace_name.end_us
        counts[0] += 1
        if parsed.partial_last_line:
            counts[4] += 1
            self.partial_lines += 1
            log.debug("%s: skipped a half-written last line", key)
        for d in parsed.damage:
            if self.strict:
                raise ProfilerDataError(d)
            log.warning("damaged profiler data, skipped: %s", d)
            self.damage.append(d)
            counts[3] += 1
        return stamp


def _fields(r: RefreshResult) -> tuple[int, ...]:
    return (r.files, r.samples, r.events, r.damage, r.partial_lines)
