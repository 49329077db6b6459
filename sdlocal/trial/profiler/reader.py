"""ProfilerReader: a job's `profiler-output/` (local folder or s3:// prefix), read incrementally.

    reader = ProfilerReader("s3://bucket/prefix/job/profiler-output", s3_client=client)
    reader.refresh()                 # lists only keys it has not read, reads each new file once
    cpu = reader.system.select(type="cpu", dimension="CPUUtilization", start_us=t0, end_us=t1)
    steps = reader.framework.steps(mode="TRAIN", start_us=t0, end_us=t1)
    reader.training_ended(); reader.loaded_all
    reader.file_span("system")       # (first, last) file-name timestamp in µs: smdebug's file list

`streams=("system",)` follows one prefix only (smdebug's system and framework readers each list
their own).

Times are epoch microseconds, windows `[start_us, end_us)` (see `sdlocal.trial.profiler.data`).

Listing: a refresh lists `system/` and `framework/` after the newest key it has read (S3
`StartAfter`; the local walk prunes older hour folders), so a poll where nothing changed costs two
LISTs that return nothing new and no GET. Files can arrive out of order (two writers, an upload
that lags): every `deep_every`-th refresh, and the last one after the end marker, lists from a
key that trails the newest by `trailing_s` instead (smdebug's reader always trails, by 5 minutes),
so a late file is read at most `deep_every` polls late. Not trailing on every poll matters with
short rotation periods: moto answers a LIST in about a millisecond per key returned, and 5 minutes
of 1-second files are 300 keys. Both end markers sort after the data keys of their prefix
(`system/training_job_end.ts` > `system/incremental/...`, `framework/training_job_end.ts` >
`framework/pevents/...`), so the same LISTs notice the end of training.
"""
from __future__ import annotations

import logging
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sdlocal.trial.profiler.data import FrameworkEvents, SystemMetrics
from sdlocal.trial.profiler.errors import Damage, ProfilerDataError
from sdlocal.trial.profiler.names import (
    FRAMEWORK_END_MARKER,
    FRAMEWORK_PREFIX,
    SYSTEM_END_MARKER,
    SYSTEM_PREFIX,
    parse_system_key,
    parse_trace_key,
)
from sdlocal.trial.profiler.parse import parse_system_file, parse_trace_file
from sdlocal.trial.storage import Storage, open_storage

log = logging.getLogger(__name__)

FETCH_THREADS = 8
SYSTEM = "system"
FRAMEWORK = "framework"


@dataclass(frozen=True)
class RefreshResult:
    files: int = 0  # new files read
    samples: int = 0  # new system samples
    events: int = 0  # new framework events
    damage: int = 0  # new damage reports
    partial_lines: int = 0  # damaged last lines skipped


class _Listing:
    """What one prefix has been read up to: keys seen, the newest one, and the trailing key."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.seen: set[str] = set()
        self.read: list[tuple[int, str]] = []  # (file timestamp µs, key) of data files
        self.newest: str | None = None  # the greatest data key read
        self.trailing: str | None = None  # where a deep listing starts

    def start_after(self, deep: bool) -> str | None:
        return self.trailing if deep else self.newest

    def add(self, key: str, stamp: int | None) -> None:
        self.seen.add(key)
        if stamp is not None:
            self.read.append((stamp, key))
            self.newest = key if self.newest is None else max(self.newest, key)

    def advance(self, trailing_us: int) -> None:
        if not self.read:
            return
        newest = max(ts for ts, _ in self.read)
        old = [key for ts, key in self.read if ts <= newest - trailing_us]
        if old:
            self.trailing = max(old)
            # Forget what no listing can return any more.
            self.read = [(ts, key) for ts, key in self.read if key > self.trailing]
            self.seen = {k for k in self.seen if k > self.trailing}


class ProfilerReader:
    def __init__(
        self,
        location: str | Path | Storage,
        *,
        s3_client: Any = None,
        endpoint_url: str | None = None,
        strict: bool = False,
        trailing_s: float = 300.0,
        deep_every: int = 10,
        streams: tuple[str, ...] = (SYSTEM, FRAMEWORK),
    ) -> None:
        unknown = set(streams) - {SYSTEM, FRAMEWORK}
        if unknown or not streams:
            raise ValueError(f"streams: {SYSTEM!r} and/or {FRAMEWORK!r}, not {sorted(unknown) or 'none'}")
        self.storage = location if isinstance(location, Storage) else open_storage(
            location, client=s3_client, endpoint_url=endpoint_url)
        self.strict = strict
        self.trailing_us = int(trailing_s * 1_000_000)
        self.deep_every = max(1, int(deep_every))
        self._refreshes = 0
        self.system = SystemMetrics()
        self.framework = FrameworkEvents()
        self.damage: list[Damage] = []
        self.partial_lines = 0
        self._system = _Listing(SYSTEM_PREFIX)
        self._framework = _Listing(FRAMEWORK_PREFIX)
        self._listings = [listing for name, listing in ((SYSTEM, self._system), (FRAMEWORK, self._framework))
                          if name in streams]
        # per stream: the smallest and greatest file-name timestamp read (system: a file's period
        # start; framework: its last event's end), in µs
        self._spans: dict[str, tuple[int, int]] = {}
        self._ended = False
        self._assumed_ended = False  # assume_ended(): no end marker to check again
        self._loaded_all = False

    def __repr__(self) -> str:
        return f"<ProfilerReader {self.storage.uri}>"

    @property
    def loaded_all(self) -> bool:
        """Training has ended and every file written before the end marker has been read."""
        return self._loaded_all

    def assume_ended(self) -> None:
        """Treat the training as ended without its end markers (a finished job evaluated afterwards,
        or the debug-output's end marker seen first): the next refresh makes the final deep pass
        and sets `loaded_all`."""
        self._ended = self._assumed_ended = True

    def file_span(self, stream: str) -> tuple[int, int] | None:
        """(first, last) file-name timestamp in µs of the data files of `stream` ("system" or
        "framework") read so far, or None: what smdebug's readers call the first and the latest
        available file."""
        return self._spans.get(stream)

    def training_ended(self) -> bool:
        if not self._ended:
            self._ended = self.storage.exists(SYSTEM_END_MARKER) or self.storage.exists(FRAMEWORK_END_MARKER)
        return self._ended

    def refresh(self) -> RefreshResult:
        """Read the files that appeared since the last refresh."""
        self._refreshes += 1
        total = self._refresh_once(deep=self._refreshes % self.deep_every == 0)
        if self._ended and not self._loaded_all:
            # The end marker is written after the last upload: one more (deep) pass sees every file.
            again = self._refresh_once(deep=True)
            total = RefreshResult(*(a + b for a, b in zip(_fields(total), _fields(again), strict=True)))
            # unless the marker is gone since: the storage lost its data (an S3 endpoint restarted
            # empty, being uploaded again, the markers last) and the pass may have missed files
            self._loaded_all = (self._assumed_ended or self.storage.exists(SYSTEM_END_MARKER)
                                or self.storage.exists(FRAMEWORK_END_MARKER))
            self._ended = self._loaded_all
        return total

    # ---- internals -------------------------------------------------------------------------------
    def _refresh_once(self, deep: bool) -> RefreshResult:
        counts = [0, 0, 0, 0, 0]
        for listing in self._listings:
            new: list[str] = []
            for key in self.storage.list(listing.prefix, start_after=listing.start_after(deep)):
                if key in listing.seen:
                    continue
                if key in (SYSTEM_END_MARKER, FRAMEWORK_END_MARKER):
                    self._ended = True
                elif parse_system_key(key) is None and parse_trace_key(key) is None:
                    listing.add(key, None)  # another kind of file (TF detailed profiles, ...): skip
                else:
                    new.append(key)
            for key, data in self._fetch(new):
                if data is not None:  # None: deleted between LIST and GET
                    listing.add(key, self._fold(key, data, counts))
            listing.advance(self.trailing_us)
        return RefreshResult(*counts)

    def _fetch(self, keys: list[str]) -> Iterator[tuple[str, bytes | None]]:
        """The keys' bytes, in order; a backlog (a finished job, a reader that starts late) is
        fetched by a few threads at once: each GET is a round trip (about 17 ms on moto)."""

        def get(key: str) -> bytes | None:
            try:
                return self.storage.read(key)
            except FileNotFoundError:
                return None

        if len(keys) < 4:
            yield from ((k, get(k)) for k in keys)
            return
        with ThreadPoolExecutor(max_workers=FETCH_THREADS) as pool:
            yield from zip(keys, pool.map(get, keys), strict=True)

    def _fold(self, key: str, data: bytes, counts: list[int]) -> int:
        """Fold one file in; returns its name's timestamp."""
        sys_name = parse_system_key(key)
        if sys_name is not None:
            parsed = parse_system_file(data, key)
            counts[1] += self.system.add(parsed.records)
            stamp, stream = sys_name.start_us, SYSTEM
        else:
            trace_name = parse_trace_key(key)
            assert trace_name is not None
            parsed = parse_trace_file(data, key, trace_name.node_id, trace_name.suffix)
            counts[2] += self.framework.add(parsed.records)
            stamp, stream = trace_name.end_us, FRAMEWORK
        span = self._spans.get(stream)
        self._spans[stream] = (stamp, stamp) if span is None else (min(span[0], stamp), max(span[1], stamp))
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
