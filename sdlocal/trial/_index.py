"""What the reader knows about a trial: every index file seen so far, folded into per-tensor,
per-step, per-worker record locations. Pure bookkeeping: no storage access here."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import NamedTuple

from sdlocal.trial.errors import CorruptRecordError
from sdlocal.trial.modes import ModeKeys, to_mode

REDUCTIONS_PREFIX = "smdebug/reductions/"
_INDEX_KEY = re.compile(r"(?:^|/)(\d{12})_(.+)\.json$")


class Location(NamedTuple):
    """One framed record: `length` bytes at `start` of the events file `key`. A NamedTuple, not a
    frozen dataclass: a trial makes one per tensor per step, and this is three times cheaper."""

    key: str
    start: int
    length: int


@dataclass
class TensorRecord:
    """Everything known about one (base) tensor name."""

    name: str
    # global step -> worker -> location of the raw value
    locations: dict[int, dict[str, Location]] = field(default_factory=dict)
    # global step -> worker -> shape (from shape_payload)
    shapes: dict[int, dict[str, tuple[int, ...]]] = field(default_factory=dict)
    # (reduction, abs) -> global step -> worker -> location of a saved reduction
    reductions: dict[tuple[str, bool], dict[int, dict[str, Location]]] = field(default_factory=dict)
    # global steps with anything (value, shape or reduction) for this tensor
    steps: set[int] = field(default_factory=set)
    modes: set[ModeKeys] = field(default_factory=set)


def parse_index_key(key: str) -> tuple[int, str] | None:
    """(global step, worker) of `index/<dir>/<step:012d>_<worker>.json`, None for other keys."""
    m = _INDEX_KEY.search(key)
    if m is None:
        return None
    return int(m.group(1)), m.group(2)


def split_reduction_name(name: str) -> tuple[str, str, bool] | None:
    """(base tensor, reduction, abs) of `smdebug/reductions/[abs_]<red>/<base>`."""
    if not name.startswith(REDUCTIONS_PREFIX):
        return None
    red, _, base = name[len(REDUCTIONS_PREFIX) :].partition("/")
    if not base or not red:
        return None
    if red.endswith("_norm"):  # smdebug writes "l2"; accept "l2_norm" too
        red = red[: -len("_norm")]
    if red.startswith("abs_"):
        return base, red[4:], True
    return base, red, False


def _inside_trial(key: str) -> bool:
    """An event file name as the writers give it: relative to the trial root, never climbing out."""
    if key == "":
        return True  # no events file: names and steps only (see below)
    return not (key.startswith("/") or "\\" in key or "\x00" in key or ".." in key.split("/"))


class IndexState:
    def __init__(self) -> None:
        self.tensors: dict[str, TensorRecord] = {}
        self.step_modes: dict[int, tuple[ModeKeys, int]] = {}
        self.mode_steps: dict[ModeKeys, dict[int, int]] = {}
        self.step_workers: dict[int, set[str]] = {}
        self.worker_max: dict[str, int] = {}
        self.mode_tensors: dict[ModeKeys, set[str]] = {}
        self.step_tensors: dict[int, set[str]] = {}
        self.keys_by_step: dict[int, list[str]] = {}
        self.seen_keys: set[str] = set()
        # events file -> where its last record known so far ends (how much of it to read whole)
        self.file_ends: dict[str, int] = {}

    def add(self, key: str, step: int, worker: str, text: bytes) -> None:
        """Fold one index file in (idempotent per key)."""
        if key in self.seen_keys:
            return
        try:
            doc = json.loads(text)
            meta = doc["meta"]
            mode = to_mode(meta.get("mode", "GLOBAL"))
            mode_step = int(meta.get("mode_step", step))
            event_key = meta.get("event_file_name", "")
            tensor_payload = [(str(p["tensorname"]), int(p["start_idx"]), int(p["length"]))
                              for p in doc.get("tensor_payload") or ()]
            shape_payload = [(str(p["tensorname"]), tuple(int(d) for d in p["shape"]))
                             for p in doc.get("shape_payload") or ()]
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
            raise CorruptRecordError(f"malformed index file: {type(e).__name__}: {e}", where=key) from e
        if not isinstance(event_key, str) or not _inside_trial(event_key):
            raise CorruptRecordError(f"event file name {event_key!r} is not a path inside the trial; refused", where=key)
        # Tensors without meta.event_file_name (smdebug's own tests write such index files) count
        # for steps and names; their values are unavailable (Location key "": trial/tensor.py).

        self.seen_keys.add(key)
        self.keys_by_step.setdefault(step, []).append(key)
        self.step_modes[step] = (mode, mode_step)
        self.mode_steps.setdefault(mode, {})[mode_step] = step
        self.step_workers.setdefault(step, set()).add(worker)
        if step > self.worker_max.get(worker, -1):
            self.worker_max[worker] = step
        mode_names = self.mode_tensors.setdefault(mode, set())
        step_names = self.step_tensors.setdefault(step, set())

        # The hot loop of opening a trial (one pass per tensor per step): locals, a Location made
        # by tuple.__new__ (what its NamedTuple __new__ does, without a Python-level call), the
        # name sets updated once per file.
        tensors = self.tensors
        make_loc = tuple.__new__
        raw_names = []
        file_end = 0
        for name, start, length in tensor_payload:
            loc = make_loc(Location, (event_key, start, length))
            if start + length > file_end:
                file_end = start + length
            if name.startswith(REDUCTIONS_PREFIX) and (red := split_reduction_name(name)) is not None:
                base, red_name, is_abs = red
                rec = self._record(base)
                rec.reductions.setdefault((red_name, is_abs), {}).setdefault(step, {})[worker] = loc
                mode_names.add(base)
                step_names.add(base)
            else:
                rec = tensors.get(name) or self._record(name)
                by_worker = rec.locations.get(step)
                if by_worker is None:
                    rec.locations[step] = {worker: loc}
                else:
                    by_worker[worker] = loc
                raw_names.append(name)
            rec.steps.add(step)
            rec.modes.add(mode)
        mode_names.update(raw_names)
        step_names.update(raw_names)
        if file_end > self.file_ends.get(event_key, 0):
            self.file_ends[event_key] = file_end
        for name, shape in shape_payload:
            rec = self._record(name)
            rec.shapes.setdefault(step, {})[worker] = shape
            rec.steps.add(step)
            rec.modes.add(mode)
            mode_names.add(rec.name)
            step_names.add(rec.name)

    def _record(self, name: str) -> TensorRecord:
        rec = self.tensors.get(name)
        if rec is None:
            rec = self.tensors[name] = TensorRecord(name)
        return rec

    def last_complete_step(self, num_workers: int) -> int | None:
        """The highest step that every worker wrote or has moved past (completeness is monotonic:
        a worker past step s is past every earlier step, so scan down from the top). The workers
        are those that wrote index files, and no step is complete before `num_workers` of them
        have: a collections file's worker name is not matched against them (smdebug counts
        workers per step too; its own test writers name the collections file `worker_0` and the
        index files `algo-1`)."""
        if not self.step_modes or not self.worker_max or len(self.worker_max) < num_workers:
            return None
        floor = min(self.worker_max.values())
        for step in sorted(self.step_modes, reverse=True):
            if step <= floor:
                return step
            written = self.step_workers.get(step, set())
            if all(w in written or last > step for w, last in self.worker_max.items()):
                return step
        return None
