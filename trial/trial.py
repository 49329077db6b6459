"""The reader: `create_trial(path or s3://bucket/prefix)` with smdebug's Trial API.

A tensor value is one ranged read of the record an index file points to; index files are read
once and folded into memory (`_index.IndexState`); `refresh()` lists only index keys after the
last one it can skip (S3 `StartAfter`), so it is one LIST and one HEAD when nothing changed.
"""
from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from trial._decode import read_value
from trial._index import IndexState, Location, parse_index_key
from trial.collection import Collection, CollectionsFile
from trial.errors import MissingCollectionFiles, TensorUnavailable
from trial.modes import ModeKeys, to_mode
from trial.storage import Storage, open_storage
from trial.tensor import Tensor

END_MARKER = "training_job_end.ts"
INDEX_PREFIX = "index/"
COLLECTIONS_PREFIX = "collections/"

ModeArg = ModeKeys | int | str | None


def _mode_or_none(mode: ModeArg) -> ModeKeys | None:
    if mode is None:
        return None
    m = to_mode(mode)
    return None if m == ModeKeys.GLOBAL else m


class Trial:
    def __init__(self, storage: Storage, name: str | None = None, range_steps: tuple[int, int] | None = None) -> None:
        self.storage = storage
        self.name = name or storage.uri.rstrip("/").rsplit("/", 1)[-1]
        self.range_steps = range_steps
        self._index = IndexState()
        self._collections: dict[str, Collection] = {}
        self._collection_files: dict[str, str] = {}  # key -> worker
        self._num_workers = 1
        self._workers: set[str] = set()
        self._ended = False
        self._loaded_all_steps = False
        self._start_after: str | None = None
        self._last_complete_step: int | None = None
        self._tensor_objects: dict[str, Tensor] = {}

    def __repr__(self) -> str:
        return f"<Trial {self.name!r} at {self.storage.uri}>"

    # ---- loading -------------------------------------------------------------------------
    def refresh(self) -> None:
        """Fold in index files written since the last refresh; notice the end of training."""
        ended_before_listing = self.training_ended()
        if not self._collections_complete():
            self._load_collections()
        new_keys = [k for k in self.storage.list(INDEX_PREFIX, start_after=self._start_after)
                    if k not in self._index.seen_keys]
        for key in new_keys:
            parsed = parse_index_key(key)
            if parsed is None:
                continue
            step, worker = parsed
            if self.range_steps is not None and not (self.range_steps[0] <= step < self.range_steps[1]):
                continue
            try:
                text = self.storage.read(key)
            except FileNotFoundError:
                continue  # deleted between LIST and GET
            self._index.add(key, step, worker, text)
            self._workers.add(worker)
        if ended_before_listing:
            self._loaded_all_steps = True
        if new_keys or ended_before_listing:
            self._update_completeness()

    def _update_completeness(self) -> None:
        idx = self._index
        self._last_complete_step = idx.last_complete_step(self._workers, self._num_workers)
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
                text = self.storage.read(key)
            except FileNotFoundError:
                continue
            cf = CollectionsFile.from_json(text, where=f"{self.storage.uri}/{key}")
            worker = key.rsplit("/", 1)[-1][: -len("_collections.json")]
            if not self._collection_files:
                self._collections = dict(cf.collections)
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
        return sorted(self._workers)

    def modes(self) -> list[ModeKeys]:
        return sorted(self._index.mode_steps)

    @property
    def last_complete_step(self) -> int | None:
        if self._loaded_all_steps and self._index.step_modes:
            return max(self._index.step_modes)
        return self._last_complete_step

    def is_step_complete(self, step: int) -> bool:
        if step not in self._index.step_modes:
            return False
        if self._loaded_all_steps:
            return True
        lcs = self._last_complete_step
        return lcs is not None and step <= lcs

    def steps(self, mode: ModeArg = None, show_incomplete_steps: bool = False) -> list[int]:
        """Global steps (mode None/GLOBAL) or the mode steps of `mode`, complete ones unless asked."""
        m = _mode_or_none(mode)
        if m is None:
            steps: Iterable[int] = self._index.step_modes
            globals_of = None
        else:
            ms = self._index.mode_steps.get(m, {})
            steps, globals_of = ms, ms
        if show_incomplete_steps or self._loaded_all_steps:
            return sorted(steps)
        lcs = self._last_complete_step
        if lcs is None:
            return []
        if globals_of is None:
            return sorted(s for s in steps if s <= lcs)
        return sorted(s for s in steps if globals_of[s] <= lcs)

    def global_step(self, mode: ModeArg, mode_step: int) -> int | None:
        m = _mode_or_none(mode)
        if m is None:
            return mode_step
        return self._index.mode_steps.get(m, {}).get(mode_step)

    def mode_modestep(self, global_step: int) -> tuple[ModeKeys | None, int | None]:
        return self._index.step_modes.get(global_step, (None, None))

    def mode_step(self, global_step: int) -> int | None:
        return self.mode_modestep(global_step)[1]

    def mode(self, global_step: int) -> ModeKeys | None:
        return self.mode_modestep(global_step)[0]

    # ---- collections and tensors -----------------------------------------------------------
    def collections(self) -> dict[str, Collection]:
        return dict(self._collections)

    def collection(self, name: str) -> Collection:
        try:
            return self._collections[name]
        except KeyError:
            raise KeyError(f"collection {name!r} not in trial (has: {sorted(self._collections)})") from None

    def tensor_names(
        self,
        collection: str | Collection | None = None,
        regex: str | Iterable[str] | None = None,
        mode: ModeArg = None,
        step: int | None = None,
    ) -> list[str]:
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
            coll = collection if isinstance(collection, Collection) else self.collection(collection)
            names = [n for n in names if coll.matches(n)]
        if regex is not None:
            patterns = [re.compile(regex)] if isinstance(regex, str) else [re.compile(r) for r in regex]
            names = [n for n in names if any(p.search(n) for p in patterns)]
        return sorted(names)

    def has_tensor(self, name: str) -> bool:
        return name in self._index.tensors

    def tensor(self, name: str) -> Tensor:
        t = self._tensor_objects.get(name)
        if t is None:
            rec = self._index.tensors.get(name)
            if rec is None:
                self.refresh()
                rec = self._index.tensors.get(name)
                if rec is None:
                    raise TensorUnavailable(name)
            t = self._tensor_objects[name] = Tensor(self, rec)
        return t

    # ---- reading ---------------------------------------------------------------------------
    def read_record(self, loc: Location) -> np.ndarray:
        """The value stored at `loc`: a ranged read, checked framing, decoded (trial/_decode.py)."""
        return read_value(self.storage, loc.key, loc.start, loc.length)


def create_trial(
    path: str | Path,
    name: str | None = None,
    *,
    s3_client: Any = None,
    endpoint_url: str | None = None,
    range_steps: tuple[int, int] | None = None,
) -> Trial:
    """Open a trial (local dir or s3://bucket/prefix) and load what is there now. Does not wait:
    call `wait_for_collections` / `refresh` to follow a live trial."""
    trial = Trial(open_storage(path, client=s3_client, endpoint_url=endpoint_url), name=name, range_steps=range_steps)
    trial.refresh()
    return trial
