"""In-memory shapes of profiler data that rules can query cheaply, by time window.

Windows are half-open `[start_us, end_us)` in epoch microseconds; None means unbounded. A system
sample is in a window when its timestamp is; an event when it overlaps the window (a zero-length
event when its instant is in it).

- `SystemMetrics`: one `Series` (sorted int64 timestamps, float64 values) per
  `SeriesKey(node, type, name, dimension)`, and `aligned()` for figures of one instant side by side
  (e.g. every core's CPUUtilization, or GPU and CPU at the same sample).
- `FrameworkEvents`: the `TraceEvent`s sorted by start, as objects (`events()`) or as columns
  (`arrays()`), and the step events as `StepArrays(start_us, end_us, step, mode)`.
"""
from __future__ import annotations

import bisect
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

from sdlocal.trial.modes import ModeKeys, to_mode
from sdlocal.trial.profiler.names import STEP_PHASE_PREFIX
from sdlocal.trial.profiler.parse import SystemRecord, TraceEvent


class SeriesKey(NamedTuple):
    node: str
    type: str
    name: str
    dimension: str


class Series(NamedTuple):
    timestamps_us: np.ndarray  # int64, ascending
    values: np.ndarray  # float64

    def __len__(self) -> int:
        return int(self.timestamps_us.shape[0])


def _window(sorted_us: np.ndarray, start_us: int | None, end_us: int | None) -> slice:
    lo = 0 if start_us is None else int(np.searchsorted(sorted_us, start_us, side="left"))
    hi = len(sorted_us) if end_us is None else int(np.searchsorted(sorted_us, end_us, side="left"))
    return slice(lo, hi)


class _SeriesBuilder:
    """Appends cheaply (`ts`/`vals` hold the samples added since the last read); on read, the new
    samples are appended to the cached arrays, or merged in by time when they are older than the
    newest one there."""

    __slots__ = ("ts", "vals", "cache")

    def __init__(self) -> None:
        self.ts: list[int] = []
        self.vals: list[float] = []
        self.cache = Series(np.empty(0, np.int64), np.empty(0, np.float64))

    def __len__(self) -> int:
        return len(self.cache) + len(self.ts)

    def series(self) -> Series:
        if self.ts:
            new_ts = np.asarray(self.ts, dtype=np.int64)
            new_vals = np.asarray(self.vals, dtype=np.float64)
            self.ts, self.vals = [], []
            ts = np.concatenate((self.cache.timestamps_us, new_ts))
            vals = np.concatenate((self.cache.values, new_vals))
            if ts.size > 1 and np.any(ts[1:] < ts[:-1]):
                order = np.argsort(ts, kind="stable")
                ts, vals = ts[order], vals[order]
            self.cache = Series(ts, vals)
        return self.cache


class SystemMetrics:
    def __init__(self) -> None:
        self._series: dict[SeriesKey, _SeriesBuilder] = {}
        self._count = 0

    def add(self, records: Iterable[SystemRecord]) -> int:
        n = 0
        for r in records:
            key = SeriesKey(r.node, r.type, r.name, r.dimension)
            b = self._series.get(key)
            if b is None:
                b = self._series[key] = _SeriesBuilder()
            b.ts.append(r.timestamp_us)
            b.vals.append(r.value)
            n += 1
        self._count += n
        return n

    def __len__(self) -> int:
        return self._count

    def nodes(self) -> list[str]:
        return sorted({k.node for k in self._series})

    def keys(self, type: str | None = None, name: str | None = None, dimension: str | None = None,
             node: str | None = None) -> list[SeriesKey]:
        """The series keys matching every filter given, sorted (cpu10 after cpu9: natural order)."""
        keys = [k for k in self._series
                if (type is None or k.type == type) and (name is None or k.name == name)
                and (dimension is None or k.dimension == dimension) and (node is None or k.node == node)]
        return sorted(keys, key=_natural)

    def series(self, key: SeriesKey, start_us: int | None = None, end_us: int | None = None) -> Series:
        b = self._series.get(key)
        if b is None:
            return Series(np.empty(0, np.int64), np.empty(0, np.float64))
        s = b.series()
        w = _window(s.timestamps_us, start_us, end_us)
        return Series(s.timestamps_us[w], s.values[w])

    def select(self, type: str | None = None, name: str | None = None, dimension: str | None = None,
               node: str | None = None, start_us: int | None = None, end_us: int | None = None
               ) -> dict[SeriesKey, Series]:
        return {k: self.series(k, start_us, end_us) for k in self.keys(type, name, dimension, node)}

    def aligned(self, keys: Iterable[SeriesKey], start_us: int | None = None, end_us: int | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
        """(timestamps, matrix): one row per distinct timestamp of any of the series, one column per
        key in the order given, NaN where a series has no sample at that instant."""
        keys = list(keys)
        parts = [self.series(k, start_us, end_us) for k in keys]
        if not parts:
            return np.empty(0, np.int64), np.empty((0, 0))
        stamps = np.unique(np.concatenate([p.timestamps_us for p in parts]))
        matrix = np.full((stamps.size, len(keys)), np.nan)
        for j, p in enumerate(parts):
            matrix[np.searchsorted(stamps, p.timestamps_us), j] = p.values
        return stamps, matrix

    def latest_by_node(self) -> dict[str, int]:
        """The newest sample timestamp (µs) of each node."""
        out: dict[str, int] = {}
        for key, b in self._series.items():
            s = b.series()
            if len(s):
                last = int(s.timestamps_us[-1])
                out[key.node] = max(out.get(key.node, last), last)
        return out

    def time_range(self) -> tuple[int, int] | None:
        """(first, last) sample timestamp in µs, or None when there is no sample."""
        bounds = [(s.timestamps_us[0], s.timestamps_us[-1]) for s in (b.series() for b in self._series.values()) if len(s)]
        if not bounds:
            return None
        return int(min(b[0] for b in bounds)), int(max(b[1] for b in bounds))


def _natural(key: SeriesKey) -> tuple[object, ...]:
    head = key.name.rstrip("0123456789")
    tail = key.name[len(head):]
    return (key.node, key.type, key.dimension, head, int(tail) if tail else -1, key.name)


class EventArrays(NamedTuple):
    start_us: np.ndarray  # int64, ascending
    end_us: np.ndarray  # int64
    phase_id: np.ndarray  # int32 index into phases
    name_id: np.ndarray  # int32 index into names
    phases: list[str]
    names: list[str]


class StepArrays(NamedTuple):
    start_us: np.ndarray  # int64, ascending
    end_us: np.ndarray  # int64
    step: np.ndarray  # int64: args.step_num (-1 when absent)
    mode: np.ndarray  # int8: ModeKeys value

    def __len__(self) -> int:
        return int(self.start_us.shape[0])

    @property
    def duration_us(self) -> np.ndarray:
        return self.end_us - self.start_us


def step_mode(phase: str) -> ModeKeys | None:
    """ModeKeys.TRAIN for "Step:ModeKeys.TRAIN"; None for other phases."""
    if not phase.startswith(STEP_PHASE_PREFIX):
        return None
    try:
        return to_mode(phase[len(STEP_PHASE_PREFIX):])
    except ValueError:
        return None


def _step_num(event: TraceEvent) -> int:
    try:
        return int((event.args or {}).get("step_num", -1))
    except (TypeError, ValueError):
        return -1


class FrameworkEvents:
    """Events sorted by start. New events are merged in when next read: a few (a live poll) are
    inserted where they belong, and the cached columns (`arrays()`, `steps()`) get the same rows
    inserted instead of being rebuilt, so following a long job costs per new event, not per
    event read so far; a backlog (more than an eighth of what is there) is sorted in at once."""

    def __init__(self) -> None:
        self._events: list[TraceEvent] = []
        self._starts: list[int] = []
        self._pending: list[TraceEvent] = []
        self._max_dur = 0
        self._max_end: int | None = None
        self._end_by_node: dict[str, int] = {}
        self._arrays: EventArrays | None = None
        self._phase_ids: dict[str, int] = {}
        self._name_ids: dict[str, int] = {}
        self._steps: StepArrays | None = None
        self._modes: dict[str, int | None] = {}  # phase -> ModeKeys value of a step phase

    def add(self, events: Iterable[TraceEvent]) -> int:
        n = 0
        for e in events:
            self._pending.append(e)
            n += 1
            self._max_dur = max(self._max_dur, e.end_us - e.start_us)
            self._max_end = e.end_us if self._max_end is None else max(self._max_end, e.end_us)
            if e.end_us > self._end_by_node.get(e.node, e.end_us - 1):
                self._end_by_node[e.node] = e.end_us
        return n

    def __len__(self) -> int:
        return len(self._events) + len(self._pending)

    def _mode_of(self, phase: str) -> int | None:
        if phase not in self._modes:
            mode = step_mode(phase)
            self._modes[phase] = None if mode is None else int(mode)
        return self._modes[phase]

    def _ensure_sorted(self) -> None:
        if not self._pending:
            return
        new = sorted(self._pending, key=lambda e: e.start_us)
        self._pending = []
        if len(new) > max(64, len(self._events) // 8):
            self._events = sorted(self._events + new, key=lambda e: e.start_us)  # stable: old first on ties
            self._starts = [e.start_us for e in self._events]
            self._arrays = self._steps = None
            return
        # where each new event goes in the OLD order (ties after the old ones, as a stable sort)
        old_at = [bisect.bisect_right(self._starts, e.start_us) for e in new]
        for shift, (e, at) in enumerate(zip(new, old_at, strict=True)):
            self._starts.insert(at + shift, e.start_us)
            self._events.insert(at + shift, e)
        if self._arrays is not None:
            a = self._arrays
            self._arrays = EventArrays(
                np.insert(a.start_us, old_at, [e.start_us for e in new]),
                np.insert(a.end_us, old_at, [e.end_us for e in new]),
                np.insert(a.phase_id, old_at, [self._phase_ids.setdefault(e.phase, len(self._phase_ids)) for e in new]),
                np.insert(a.name_id, old_at, [self._name_ids.setdefault(e.name, len(self._name_ids)) for e in new]),
                list(self._phase_ids), list(self._name_ids))
        if self._steps is not None:
            rows = [(e, m) for e in new if (m := self._mode_of(e.phase)) is not None]
            if rows:
                s = self._steps
                where = np.searchsorted(s.start_us, [e.start_us for e, _ in rows], side="right")
                self._steps = StepArrays(np.insert(s.start_us, where, [e.start_us for e, _ in rows]),
                                         np.insert(s.end_us, where, [e.end_us for e, _ in rows]),
                                         np.insert(s.step, where, [_step_num(e) for e, _ in rows]),
                                         np.insert(s.mode, where, [m for _, m in rows]))

    def events(self, start_us: int | None = None, end_us: int | None = None, *, phase: str | None = None,
               name: str | None = None) -> list[TraceEvent]:
        """Events overlapping the window, by start time, filtered by exact phase and/or name."""
        self._ensure_sorted()
        # Only events that start less than the longest duration before the window can overlap it.
        lo = 0 if start_us is None else bisect.bisect_left(self._starts, start_us - self._max_dur)
        hi = len(self._events) if end_us is None else bisect.bisect_left(self._starts, end_us)
        out = []
        for e in self._events[lo:hi]:
            if start_us is not None and max(e.end_us, e.start_us + 1) <= start_us:
                continue
            if (phase is None or e.phase == phase) and (name is None or e.name == name):
                out.append(e)
        return out

    def arrays(self) -> EventArrays:
        """Every event as columns (kept up to date as events arrive)."""
        self._ensure_sorted()
        if self._arrays is None:
            self._phase_ids, self._name_ids = {}, {}
            phases, names = self._phase_ids, self._name_ids
            ev = self._events
            self._arrays = EventArrays(
                np.fromiter((e.start_us for e in ev), np.int64, len(ev)),
                np.fromiter((e.end_us for e in ev), np.int64, len(ev)),
                np.fromiter((phases.setdefault(e.phase, len(phases)) for e in ev), np.int32, len(ev)),
                np.fromiter((names.setdefault(e.name, len(names)) for e in ev), np.int32, len(ev)),
                list(phases), list(names))
        return self._arrays

    def steps(self, mode: ModeKeys | int | str | None = None, start_us: int | None = None,
              end_us: int | None = None) -> StepArrays:
        """Step events ("Step:ModeKeys.<MODE>" phases) of one mode, or all, overlapping the window."""
        self._ensure_sorted()
        if self._steps is None:
            rows = [(e.start_us, e.end_us, _step_num(e), m) for e in self._events
                    if (m := self._mode_of(e.phase)) is not None]
            cols = list(zip(*rows, strict=True)) if rows else [(), (), (), ()]
            self._steps = StepArrays(np.asarray(cols[0], np.int64), np.asarray(cols[1], np.int64),
                                     np.asarray(cols[2], np.int64), np.asarray(cols[3], np.int8))
        s = self._steps
        keep = np.ones(len(s), dtype=bool)
        if mode is not None:
            keep &= s.mode == int(to_mode(mode))
        if start_us is not None:
            keep &= np.maximum(s.end_us, s.start_us + 1) > start_us
        if end_us is not None:
            keep &= s.start_us < end_us
        if keep.all():
            return s
        return StepArrays(s.start_us[keep], s.end_us[keep], s.step[keep], s.mode[keep])

    def latest_end_by_node(self) -> dict[str, int]:
        """The latest event end (µs) of each node (trace writer)."""
        return dict(self._end_by_node)

    def time_range(self) -> tuple[int, int] | None:
        """(first start, last end) in µs, or None when there is no event."""
        if self._max_end is None:
            return None
        self._ensure_sorted()
        return self._events[0].start_us, self._max_end
