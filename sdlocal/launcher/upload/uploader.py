"""The platform's uploads: the job's local outputs (the hook's tensors, TensorBoard files, the profiler's
files) go up to their S3 prefixes continuously while the job runs, each closed file once (again if
it changed), the end markers after the final upload; what S3 loses meanwhile goes up again."""
from __future__ import annotations

import itertools
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sdlocal.hook.step_record import RECORD_NAME
from sdlocal.launcher.upload.watch import SETTLE_S, Change, TreeWatch
from sdlocal.trial.storage import Storage, add_outage_listener
from sdlocal.trial.writer import END_MARKER


@dataclass(frozen=True)
class UploadTarget:
    local: Path
    storage: Storage  # where the files go, at their paths relative to `local`
    mutable: bool = False  # its files are appended to in place (TensorBoard's): looked at every tick


def _rank(rel: str) -> int:
    """Upload order: an events file before the index file that points to it; collections early."""
    top = rel.split("/", 1)[0]
    return {"events": 0, "collections": 1, "index": 3}.get(top, 2)


def _not_uploaded(rel: str) -> bool:
    # the hook's own end marker (the platform writes it after all) and its step record (for the
    # launcher only: hook/step_record.py)
    return rel.rsplit("/", 1)[-1] in (END_MARKER, RECORD_NAME)


# PUTs in flight at once: a PUT is mostly a round trip (measured on the 2-core VM under load, moto
# in a process of its own: 24 ms each one at a time, 15.5 ms with 4 in flight); without them a
# 3,000-step job (34 files/s) outran the uploader
UPLOAD_THREADS = 4


_INDEX_FILE = re.compile(r"^index/\d+/((\d+)_[^/]+)\.json$")  # -> events/<step>/<step>_<worker>.tfevents


class Uploader:
    """Uploads the closed files of each target (each once; again if it changed) every `interval`
    seconds on a thread, looking only at what is new (launcher/upload/watch.py). Index files go up after
    the events files they point to: `TreeWatch` looks at `index/` before `events/` (the hook
    renames an events file before it creates its index file), and the events folder of each new
    index file is looked at again before it goes up.

    It also keeps what it uploaded there: each tick it checks that the first object of each target
    is still in S3 (one HEAD); when it is gone (an endpoint restarted empty), the target's files go
    up again in the same order, then the markers written through `write_marker` (the end markers),
    and `keepers` (the rules' statuses, launcher/statuses/keeper.py) put back what they saw. The
    thread runs until `close()`: after the final upload (`finish`), evaluators still read."""

    def __init__(
        self,
        targets: Iterable[UploadTarget],
        *,
        interval: float = 1.0,
        on_error: Callable[[Exception], None] | None = None,
        echo: Callable[[str], None] | None = None,
        keepers: Sequence[Any] = (),
        settle_s: float = SETTLE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.targets = list(targets)
        self.clock = clock
        self.interval = interval
        self.on_error = on_error
        self.echo = echo
        self.keepers = keepers  # objects with poll(): looked at each tick (a list the caller may grow)
        self.uploaded: deque[str] = deque(maxlen=1000)  # the last storage URIs uploaded, in order (tests, logs)
        self.uploaded_count = 0
        self.restored = 0  # times a target's objects were found gone and uploaded again
        self._watches = [TreeWatch(t.local, ignore=_not_uploaded, mutable=t.mutable, first=("index",),
                                   settle_s=settle_s)
                         for t in self.targets]
        self._canaries: list[str | None] = [None] * len(self.targets)
        self._markers: list[tuple[Storage, str]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None  # made at the first pass with more than one file
        # S3 may have lost something: an outage was said, an upload failed, or a target's first
        # object vanished. Only then does `finish` compare every file with a listing of S3 (a
        # LIST of a 3,000-step job costs moto 5 s: without a fault, every PUT S3 answered is there)
        self.doubt = False
        self._remove_listener: Callable[[], None] | None = None

    def sync_once(self, *, final: bool = False) -> int:
        """One pass: the targets checked, their new files uploaded; the number uploaded.
        `final`: every file and folder looked at (the last upload of the job)."""
        count = 0
        with self._lock:
            lost = [i for i in range(len(self.targets)) if self._lost(i)]
            for i in lost:
                self._watches[i].forget()
            if lost:
                self.doubt = True
            if lost and self.echo is not None:
                where = ", ".join(self.targets[i].storage.uri for i in lost)
                self.echo(f"Warning: S3 lost the job's objects under {where} (the endpoint restarted empty?): "
                          "uploading them again")
            for i, target in enumerate(self.targets):
                watch = self._watches[i]
                count += self._upload(i, target, watch.final() if final else watch.changes())
            for i in lost:
                self.restored += 1
                uri = self.targets[i].storage.uri
                for storage, key in self._markers:
                    if storage.uri == uri:
                        storage.write(key, b"")
            for keeper in list(self.keepers):
                keeper.poll()
        return count

    def _lost(self, i: int) -> bool:
        canary = self._canaries[i]
        return canary is not None and not self.targets[i].storage.exists(canary)

    def _upload(self, i: int, target: UploadTarget, changes: list[Change]) -> int:
        watch = self._watches[i]
        names = {c.rel for c in changes}
        for change in list(changes):
            m = _INDEX_FILE.match(change.rel)
            if m is not None and f"events/{m.group(2)}/{m.group(1)}.tfevents" not in names:
                # its events file goes first, if it was not in this pass (a folder retired before a
                # slow worker's file came)
                events = [c for c in watch.examine(f"events/{m.group(2)}") if c.rel not in names]
                names.update(c.rel for c in events)
                changes.extend(events)
        changes.sort(key=lambda c: (_rank(c.rel), c.rel))
        count = 0
        for _rank_of, group in itertools.groupby(changes, key=lambda c: _rank(c.rel)):
            count += self._put_all(i, target, list(group))  # a rank is all in S3 before the next starts
        return count

    def _put_all(self, i: int, target: UploadTarget, group: list[Change]) -> int:
        """Upload `group` (UPLOAD_THREADS at a time); the bookkeeping stays on this thread, in order."""
        def send(change: Change) -> bool:
            try:
                target.storage.write_file(change.rel, change.path)
            except FileNotFoundError:
                return False  # renamed away since the listing (a writer's rotation): the next pass has it
            return True

        if len(group) > 1:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(UPLOAD_THREADS, thread_name_prefix="sdlocal-upload")
            sent: Iterable[bool] = self._pool.map(send, group)
        else:
            sent = map(send, group)
        count = 0
        for change, ok in zip(group, sent, strict=True):
            if not ok:
                continue
            self._watches[i].done(change)
            if self._canaries[i] is None:
                self._canaries[i] = change.rel
            self.uploaded.append(f"{target.storage.uri}/{change.rel}")
            self.uploaded_count += 1
            count += 1
        return count

    def write_marker(self, storage: Storage, key: str) -> None:
        """Write an empty marker object (written again after the target's files when S3 lost them)."""
        with self._lock:
            storage.write(key, b"")
            self._markers.append((storage, key))

    def _outage(self, line: str) -> None:
        self.doubt = True

    def start(self) -> None:
        self._remove_listener = add_outage_listener(self._outage)
        self._thread = threading.Thread(target=self._run, name="sdlocal-uploader", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        # a pass starts `interval` after the last one started, at once when that one took longer:
        # an uploader that is behind does not also sit idle for a whole interval between passes
        wait = self.interval
        while not self._stop.wait(wait):
            started = self.clock()
            try:
                self.sync_once()
            except Exception as e:  # keep going: the final upload retries and reports
                self.doubt = True
                if self.on_error:
                    self.on_error(e)
            wait = max(0.0, self.interval - (self.clock() - started))

    def finish(self) -> int:
        """The final upload (every file looked at), then, when S3 may have lost something (`doubt`),
        each target checked against one listing of S3: a file S3 lost without the first object
        going with it (a partial loss, a restart between two looks) goes up again. Its errors propagate. The thread goes on checking what
        was uploaded until `close()`."""
        count = self.sync_once(final=True)
        if not self.doubt:
            return count
        with self._lock:
            for i, target in enumerate(self.targets):
                missing = self._missing(target)
                if missing and self.echo is not None:
                    self.echo(f"Warning: {len(missing)} file(s) were not in {target.storage.uri}: uploading them again")
                count += self._upload(i, target, missing)
        return count

    def _missing(self, target: UploadTarget) -> list[Change]:
        """Closed local files of `target` that S3 does not have (one listing, one walk: once a job)."""
        stored = set(target.storage.list(include_tmp=True))
        out: list[Change] = []
        for path in sorted(target.local.rglob("*")) if target.local.is_dir() else ():
            rel = path.relative_to(target.local).as_posix()
            if rel in stored or path.name.endswith(".tmp") or _not_uploaded(rel) or not path.is_file():
                continue
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            out.append(Change(rel, path, (st.st_size, st.st_mtime_ns), st.st_ctime_ns))
        return out

    def close(self, timeout: float = 30.0) -> None:
        """Stop the thread (it may be in an S3 call: waited for up to `timeout` seconds)."""
        self._stop.set()
        if self._remove_listener is not None:
            self._remove_listener()
        if self._thread is not None:
            self._thread.join(timeout)
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)


def write_end_marker(storage: Storage, folder: str = "") -> None:
    """`training_job_end.ts` at the storage's root (debug output) or in `folder` (the profiler's
    `system/` and `framework/`), written after the final upload: readers take it as the end."""
    storage.write(f"{folder.rstrip('/')}/{END_MARKER}" if folder else END_MARKER, b"")
