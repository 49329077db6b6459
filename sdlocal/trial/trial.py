"""The reader: `create_trial(path or s3://bucket/prefix)` with smdebug's Trial API.

A tensor value is one ranged read of the record an index file points to, or, for small records of
an events file already read from, a slice of that file kept whole (`_file_cache`); index files are read
once and folded into memory (`_index.IndexState`); `refresh()` lists only index keys after the
last one it can skip (S3 `StartAfter`), so it is one LIST and one HEAD when nothing changed.

Like smdebug's, a trial refreshes by itself (`maybe_refresh`): `steps()`, `tensor_names()`,
`workers()`, `has_passed_step()` and a lookup of a tensor or step it does not know yet look for
new data first. What keeps that cheap: a trial whose training has ended and whose index was listed
after that (`loaded_all_steps`) never touches storage again to answer them; known tensors and
steps are answered from memory; and `no_refresh(trials)` (trial/refresh.py) turns it off for a
block; the evaluator loop refreshes once per poll and judges the step inside such a block.
"""
from __future__ import annotations

import logging
import os
import re
import time
from bisect import bisect_right
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from sdlocal.trial._decode import read_record_value, read_value
from sdlocal.trial._file_cache import SMALL_RECORD_BYTES, FileCache
from sdlocal.trial._index import IndexState, Location, parse_index_key
from sdlocal.trial.collection import CollectionsFile
from sdlocal.trial.errors import (
    CorruptRecordError,
    MissingCollectionFiles,
    MissingEventsFile,
    TensorUnavailable,
)
from sdlocal.trial.modes import ModeKeys, to_mode
from sdlocal.trial.mutable_collection import MutableCollection
from sdlocal.trial.steps import StepState, step_state, wait_for_steps, within_wait_window
from sdlocal.trial.storage import Storage, open_storage
from sdlocal.trial.tensor import Tensor
from sdlocal.trial.writer import END_MARKER

INDEX_PREFIX = "index/"
COLLECTIONS_PREFIX = "collections/"
# wait_for_steps' deadline when none is given: smdebug waits forever for a live job; a day bounds it.
STEP_WAIT_TIMEOUT_S = 86400.0
# smdebug's setting: at most this many saved steps wait for a worker that stays behind (below).
INCOMPLETE_STEP_WAIT_WINDOW_KEY = "SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW"
INCOMPLETE_STEP_WAIT_WINDOW_DEFAULT = 1000
VANISHED_POLL_S = 0.5  # how often a vanished events file is looked for

ModeArg = Any  # ModeKeys, a foreign Enum named like one (the real smdebug's modes), int, str or None

logger = logging.getLogger("sdlocal.trial")


def _mode_or_none(mode: ModeArg) -> ModeKeys | None:
    """None for GLOBAL (every step), else the mode."""
    if mode is None:
        return None
    m = to_mode(mode)
    return None if m == ModeKeys.GLOBAL else m


def _suffix_number(name: str) -> int:
    """smdebug's order of `<name>_<n>` tensors (inputs, labels, predictions): by `n`."""
    tail = name.rsplit("_", 1)[-1] if re.match(r".+_\d+$", name) else "0"
    return int(tail)


MAX_METADATA_BYTES = 32 << 20  # an index or collections file (a step of 100,000 tensors is ~15 MB)


def read_metadata(storage: Storage, key: str) -> bytes:
    """An index or collections file, refused past MAX_METADATA_BYTES (read no further than that)."""
    text = storage.read(key, 0, MAX_METADATA_BYTES + 1)
    if len(text) > MAX_METADATA_BYTES:
        raise CorruptRecordError(f"over {MAX_METADATA_BYTES:,} bytes: not an index or collections file this "
                                 "reader loads; refused", where=f"{storage.uri}/{key}")
    return text


class Trial:
    def __init__(self, storage: Storage, name: str | None = None, range_steps: tuple[int | None, int | None] | None = None) -> None:
        self.storage = storage
        self.name = name or storage.uri.rstrip("/").rsplit("/", 1)[-1]
        self.range_steps = range_steps
        self.logger = logger
        # smdebug's switch for the implicit refresh (no_refresh turns it off for a block)
        self.dynamic_refresh = True
        self._index = IndexState()
        self._collections: dict[str, MutableCollection] = {}
        self._collection_files: dict[str, str] = {}  # key -> worker
        self._num_workers = 1
        self._workers: set[str] = set()
        self._ended = False
        self._loaded_all_steps = False
        self._start_after: str | None = None
        self._last_complete_step: int | None = None
        self._tensor_objects: dict[str, Tensor] = {}
        self._sorted: dict[ModeKeys | None, tuple[int, list[int]]] = {}
        self._wait_window = max(2, int(os.environ.get(INCOMPLETE_STEP_WAIT_WINDOW_KEY, INCOMPLETE_STEP_WAIT_WINDOW_DEFAULT)))
        # events files the index names and that are not there (lost data): each raised as
        # MissingEventsFile when read, and kept here so that a reader that swallows that error (a
        # rule catching TensorUnavailableForStep) cannot hide it from the evaluator
        self.missing_files: list[str] = []
        self._files = FileCache()

    def __repr__(self) -> str:
        return f"<Trial {self.name!r} at {self.storage.uri}>"

    @property
    def path(self) -> str:
        return self.storage.uri

    # ---- loading -------------------------------------------------------------------------
    def refresh(self) -> None:
        """Fold in index files written since the last refresh; notice the end of training. Once
        every step is loaded (training ended, then listed) there is nothing left to fetch."""
        if self._loaded_all_steps:
            return
        ended_before_listing = self.training_ended()
        vanished = False
        if not self._collections_complete():
            self._load_collections()
        new_keys = [k for k in self.storage.list(INDEX_PREFIX, start_after=self._start_after)
                    if k not in self._index.seen_keys]
        for key in new_keys:
            parsed = parse_index_key(key)
            if parsed is None:
                continue
            step, worker = parsed
            if not self._in_range(step):
                continue
            try:
                text = read_metadata(self.storage, key)
            except FileNotFoundError:
                # deleted between LIST and GET (an S3 endpoint that restarted empty): the keys after
                # it wait for the next refresh, so that re-listing from the last complete step finds
                # this one again once it is back, instead of listing past it for good
                break
            self._index.add(key, step, worker, text)
            self._workers.add(worker)
        if ended_before_listing and not self.storage.exists(END_MARKER):
            # The end marker seen before this listing is gone: the storage lost its data (an S3
            # endpoint restarted empty, its objects being uploaded again) and the listing may be
            # partial. The end counts again once the marker is back: it is uploaded last.
            self._ended = ended_before_listing = False
            vanished = True
        if ended_before_listing:
            self._loaded_all_steps = True
        if new_keys or ended_before_listing:
            self._update_completeness()
        if vanished:
            self._start_after = None  # list from the start once: what comes back may come in any order

    def maybe_refresh(self, name: str | None = None) -> None:
        """smdebug's implicit refresh: a no-op once every step is loaded or inside `no_refresh`."""
        if self._loaded_all_steps or not self.dynamic_refresh:
            return
        self.refresh()

    def _in_range(self, step: int) -> bool:
        if self.range_steps is None:
            return True
        begin, end = self.range_steps
        return (begin is None or step >= begin) and (end is None or step < end)

    def _update_completeness(self) -> None:
        idx = self._index
        self._last_complete_step = within_wait_window(
            self._sorted_steps(None), idx.last_complete_step(self._num_workers), self._wait_window)
        if not idx.keys_by_step:
            return
        # Re-list from the first step that can still get files; a fully complete trial re-lists nothing.
        if self._last_complete_step is None:
            self._start_after = None
        elif self._last_complete_step == max(idx.keys_by_step) or self._loaded_all_steps:
            self._start_after = max(idx.keys_by_step[max(idx.keys_by_step)])
        else:
            self._start_after = max(idx.keys_by_step[self._last_complete_step])

    def _collections_complete(self) -> bool:
        return bool(self._collection_files) and len(self._collection_files) >= self._num_workers

    def _load_collections(self) -> bool:
        for key in self.storage.list(COLLECTIONS_PREFIX):
            if key in self._collection_files or not key.endswith("_collections.json"):
                continue
            try:
                text = read_metadata(self.storage, key)
            except FileNotFoundError:
                continue
            cf = CollectionsFile.from_json(text, where=f"{self.storage.uri}/{key}")
            worker = key.rsplit("/", 1)[-1][: -len("_collections.json")]
            if not self._collection_files:
                self._collections.update({n: MutableCollection.of(c) for n, c in cf.collections.items()})
                self._num_workers = cf.num_workers
            self._collection_files[key] = worker
            self._workers.add(worker)
        return self._collections_complete()

    def wait_for_collections(
        self,
        timeout: float,
        interval: float = 2.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Poll until every worker's collections file is there. Raises MissingCollectionFiles when
        training ends first (smdebug's message) or when `timeout` seconds pass."""
        deadline = clock() + timeout
        while True:
            ended = self.training_ended()
            if self._collections_complete() or self._load_collections():
                return
            if ended:
                raise MissingCollectionFiles()
            if clock() >= deadline:
                raise MissingCollectionFiles(
                    f"Collection files did not appear under {self.storage.uri}/{COLLECTIONS_PREFIX} "
                    f"within {timeout:g}s"
                )
            sleep(interval)

    def training_ended(self) -> bool:
        if not self._ended:
            self._ended = self.storage.exists(END_MARKER)
        return self._ended

    @property
    def loaded_all_steps(self) -> bool:
        """Training has ended and the index was listed after that: no step will ever be added."""
        return self._loaded_all_steps

    # ---- steps, modes, workers -------------------------------------------------------------
    @property
    def num_workers(self) -> int:
        return self._num_workers

    def workers(self) -> list[str]:
        self.maybe_refresh()
        return sorted(self._workers)

    def modes(self) -> list[ModeKeys]:
        """The modes steps were saved in (as smdebug's: GLOBAL, a hook that never set a mode, is not one)."""
        return sorted(m for m in self._index.mode_steps if m != ModeKeys.GLOBAL)

    @property
    def last_complete_step(self) -> int:
        """The highest complete global step; -1 when there is none (smdebug's value)."""
        if self._loaded_all_steps and self._index.step_modes:
            return max(self._index.step_modes)
        return -1 if self._last_complete_step is None else self._last_complete_step

    def is_step_complete(self, step: int) -> bool:
        if step not in self._index.step_modes:
            return False
        if self._loaded_all_steps:
            return True
        lcs = self._last_complete_step
        return lcs is not None and step <= lcs

    def _sorted_steps(self, m: ModeKeys | None) -> list[int]:
        """Every known step (global, or mode steps of `m`), sorted; re-sorted only when steps came."""
        src = self._index.step_modes if m is None else self._index.mode_steps.get(m, {})
        cached = self._sorted.get(m)
        if cached is None or cached[0] != len(src):
            cached = self._sorted[m] = (len(src), sorted(src))
        return cached[1]

    def _steps_now(self, m: ModeKeys | None, show_incomplete_steps: bool) -> list[int]:
        steps = self._sorted_steps(m)
        if show_incomplete_steps or self._loaded_all_steps:
            return list(steps)
        lcs = self._last_complete_step
        if lcs is None:
            return []
        if m is None:
            return steps[: bisect_right(steps, lcs)]
        # a mode not seen yet (EVAL before the first evaluation of a live job) has no steps yet
        globals_of = self._index.mode_steps.get(m, {})
        return [s for s in steps if globals_of[s] <= lcs]

    def steps(self, mode: ModeArg = ModeKeys.GLOBAL, show_incomplete_steps: bool = False) -> list[int]:
        """Global steps (mode GLOBAL/None) or the mode steps of `mode`, complete ones unless asked."""
        self.maybe_refresh()
        return self._steps_now(_mode_or_none(mode), show_incomplete_steps)

    def _known_global(self, m: ModeKeys | None, mode_step: int) -> int | None:
        if m is None:
            return mode_step
        return self._index.mode_steps.get(m, {}).get(mode_step)

    def global_step(self, mode: ModeArg, mode_step: int) -> int | None:
        m = _mode_or_none(mode)
        g = self._known_global(m, mode_step)
        if g is None:
            self.maybe_refresh()
            g = self._known_global(m, mode_step)
        return g

    def mode_modestep(self, global_step: int) -> tuple[ModeKeys | None, int | None]:
        if global_step not in self._index.step_modes:
            self.maybe_refresh()
        return self._index.step_modes.get(global_step, (None, None))

    def mode_step(self, global_step: int) -> int | None:
        return self.mode_modestep(global_step)[1]

    def mode(self, global_step: int) -> ModeKeys | None:
        return self.mode_modestep(global_step)[0]

    @property
    def _global_to_mode(self) -> dict[int, tuple[ModeKeys, int]]:
        """smdebug's map global step -> (mode, mode step); public rules read it. Not refreshed."""
        return self._index.step_modes

    @property
    def _mode_to_global(self) -> dict[ModeKeys, dict[int, int]]:
        """smdebug's map mode -> mode step -> global step (without GLOBAL). Not refreshed."""
        return {m: d for m, d in self._index.mode_steps.items() if m != ModeKeys.GLOBAL}

    def has_passed_step(self, step: int, mode: ModeArg = ModeKeys.GLOBAL) -> StepState:
        """AVAILABLE: `step` (of `mode`) is saved and complete; UNAVAILABLE: it was not saved and
        never will be (a later step is complete, or training ended); NOT_YET_AVAILABLE otherwise."""
        self.maybe_refresh()
        return self._step_state(step, _mode_or_none(mode))

    def _step_state(self, step: int, m: ModeKeys | None) -> StepState:
        return step_state(self, step, m)

    def wait_for_steps(
        self,
        required_steps: Iterable[int],
        mode: ModeArg = ModeKeys.GLOBAL,
        *,
        timeout: float = STEP_WAIT_TIMEOUT_S,
        interval: float = 2.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Return once every step of `required_steps` (steps of `mode`) is complete. Raises
        StepUnavailable for a step that was skipped, NoMoreData for one past the last step of a
        finished training, and StepNotYetAvailable when `timeout` seconds pass first (smdebug
        waits forever). Refreshes while it waits, even inside `no_refresh`; a step already
        complete costs no storage access."""
        wait_for_steps(self, required_steps, mode, _mode_or_none(mode), timeout=timeout, interval=interval,
                       sleep=sleep, clock=clock)

    # ---- collections and tensors -----------------------------------------------------------
    def collections(self) -> dict[str, MutableCollection]:
        return self._collections

    def collection(self, name: str) -> MutableCollection:
        """The collection called `name`; as smdebug's, an empty one is made (in this trial's view)
        when the trial has none by that name, to be widened with `include`/`add_tensor_name`."""
        coll = self._collections.get(name)
        if coll is None:
            coll = self._collections[name] = MutableCollection(name)
        return coll

    def _resolve_collection(self, collection: Any) -> Any:
        if isinstance(collection, str):
            return self.collection(collection)
        name = getattr(collection, "name", None)
        if not isinstance(name, str):
            raise TypeError(f"Invalid argument type for collection {type(collection)}")
        # smdebug looks a passed Collection up by name in the trial; one the trial lacks is used as given
        if name in self._collections or not callable(getattr(collection, "matches", None)):
            return self.collection(name)
        return collection

    def tensor_names(
        self,
        show_prefixed_tensors: bool = False,
        *,
        step: int | None = None,
        mode: ModeArg = ModeKeys.GLOBAL,
        regex: str | Iterable[str] | None = None,
        collection: Any = None,
    ) -> list[str]:
        """Names of the saved tensors: all, or those saved at `step` (a step of `mode`), or in
        `mode`; then those of `collection` (a name or a Collection) or matching `regex` (one of
        them only, as smdebug's). `show_prefixed_tensors` is accepted and changes nothing:
        reductions are folded into their tensor's name."""
        if regex is not None and collection is not None:
            raise ValueError("Only one of `regex` or `collection` can be passed to this method")
        self.maybe_refresh()
        idx = self._index
        m = _mode_or_none(mode)
        names: Iterable[str]
        if step is not None:
            g = step if m is None else idx.mode_steps.get(m, {}).get(step)
            names = idx.step_tensors.get(g, set()) if g is not None else set()
        elif m is not None:
            names = idx.mode_tensors.get(m, set())
        else:
            names = idx.tensors
        if collection is not None:
            coll = self._resolve_collection(collection)
            names = [n for n in names if coll.matches(n)]
        if regex is not None:
            patterns = [re.compile(regex)] if isinstance(regex, str) else [re.compile(r) for r in regex]
            names = [n for n in names if any(p.search(n) for p in patterns)]
        return sorted(names)

    def has_tensor(self, tname: str) -> bool:
        if tname not in self._index.tensors:
            self.maybe_refresh(tname)
        return tname in self._index.tensors

    def tensor(self, tname: str) -> Tensor:
        t = self._tensor_objects.get(tname)
        if t is None:
            if not self.has_tensor(tname):
                raise TensorUnavailable(tname)
            t = self._tensor_objects[tname] = Tensor(self, self._index.tensors[tname])
        return t

    def _values_by_suffix(self, step: int, mode: ModeArg, **selection: Any) -> list[np.ndarray]:
        names = sorted(self.tensor_names(step=step, mode=mode, **selection), key=_suffix_number)
        return [self.tensor(n).value(step, mode=mode) for n in names]

    def inputs(self, step: int, mode: ModeArg = ModeKeys.GLOBAL) -> list[np.ndarray]:
        """Values of the `inputs` collection at `step`, in the order of their `_<n>` suffix."""
        return self._values_by_suffix(step, mode, collection="inputs")

    def labels(self, step: int, mode: ModeArg = ModeKeys.GLOBAL) -> list[np.ndarray]:
        return self._values_by_suffix(step, mode, regex="labels*")

    def predictions(self, step: int, mode: ModeArg = ModeKeys.GLOBAL) -> list[np.ndarray]:
        return self._values_by_suffix(step, mode, regex="predictions*")

    # ---- reading ---------------------------------------------------------------------------
    def missing_events_file(self, key: str, tname: str, step: int, mode: Any) -> MissingEventsFile:
        where = f"{self.storage.uri.rstrip('/')}/{key}"
        if where not in self.missing_files:
            self.missing_files.append(where)
        return MissingEventsFile(where, tname, step, mode)

    def read_record(self, loc: Location) -> np.ndarray:
        """The value stored at `loc`: a ranged read, checked framing, decoded (trial/_decode.py). An
        events file the index names and that is not there: on a storage that rides out outages (S3),
        waited for (an endpoint that restarted empty gets the job's files again, its index files
        may come back before their events files); elsewhere, or past that wait, missing for good."""
        try:
            return self._read_record(loc)
        except FileNotFoundError:
            if self.storage.outage_wait_s <= 0:
                raise  # the tensor raises MissingEventsFile naming it
            self._await_key(loc.key)
            return self._read_record(loc)

    def _read_record(self, loc: Location) -> np.ndarray:
        key, start, length = loc
        if length < SMALL_RECORD_BYTES:
            data = self._files.get(self.storage, key, self._index.file_ends.get(key, 0))
            if data is not None:
                try:
                    return read_record_value(data[start:start + length], length, self.storage.uri, key, start)
                except CorruptRecordError:
                    self._files.drop(key)  # read again next time: a damaged file may be replaced
                    raise
        return read_value(self.storage, key, start, length)

    def _await_key(self, key: str) -> None:
        """Wait (the storage's outage wait, 120 s on S3) for a missing events file to be uploaded
        (again); after that, FileNotFoundError: the file is missing for good (MissingEventsFile)."""
        wait_s = self.storage.outage_wait_s
        deadline = time.monotonic() + wait_s
        logger.warning("%s/%s is named by the trial's index but is not there (S3 restarted empty?): "
                       "waiting up to %g s for it", self.storage.uri, key, wait_s)
        while not self.storage.exists(key):
            if time.monotonic() >= deadline:
                raise FileNotFoundError(key)
            time.sleep(VANISHED_POLL_S)


def create_trial(
    path: str | Path,
    name: str | None = None,
    *,
    s3_client: Any = None,
    endpoint_url: str | None = None,
    range_steps: tuple[int | None, int | None] | None = None,
) -> Trial:
    """Open a trial (local dir or s3://bucket/prefix) and load what is there now. Does not wait:
    call `wait_for_collections` / `refresh` to follow a live trial (smdebug's `create_trial`,
    which waits for the collections files, is trial.kinds.open_trial)."""
    trial = Trial(open_storage(path, client=s3_client, endpoint_url=endpoint_url), name=name, range_steps=range_steps)
    trial.refresh()
    return trial
