"""Which closed files under a folder are new or changed since the uploader last looked, at a cost
proportional to what is new, not to what is there (a 3,000-step job has 6,000+ tensor files; the
profiler adds 60 a minute), with memory flat in the number of files.

How: a directory's mtime changes when an entry is added, renamed or removed in it, and every writer
of a job's output (the hook, smdebug's hook, the profiler's writers) writes `<name>.tmp` and renames
it when closed. So a directory is listed again only when its mtime changed since it was listed (or
is too close to that listing to tell: timestamps come from a coarse clock), and its files are
`stat`ed only when they are new, or were written in the last `settle_s` seconds (they may still be
rewritten in place).

Directories that hold only files and have not changed for `settle_s` are retired: forgotten, but
for their mtime until the next sweep. Every `sweep_s` seconds, and at the final pass, a sweep
`stat`s every directory; one that changed since it was retired (a slow worker's file in an old step
folder) is listed again, and its files whose ctime is past what was seen are the new ones (a
rename sets the ctime). After a sweep, one watermark stands for all retired directories. Parent
directories (`events/`, `index/`, the profiler's hour folders' parents) are never retired: they
are few, and a new child appears in them.

A mutable target (TensorBoard's files, appended to in place) has no retired directories and its
files are `stat`ed every time, as before: its files are few.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

SETTLE_S = 5.0
SWEEP_S = 30.0
# mtimes come from the kernel's coarse clock (a jiffy) or a coarser filesystem clock: an entry
# added within this long of a listing might leave the mtime the listing saw unchanged
RACY_NS = 1_000_000_000
TMP_SUFFIX = ".tmp"

Signature = tuple[int, int]  # (size, mtime_ns)


@dataclass(frozen=True)
class Change:
    rel: str  # path relative to the root, "/"-separated
    path: Path
    signature: Signature
    ctime_ns: int = 0


@dataclass
class _Dir:
    mtime_ns: int = -1  # when it was last listed (-1: never)
    listed_at_ns: int = 0
    cutoff_ns: int = -1  # files whose ctime is past this are new (a directory brought back from retirement)
    files: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # name -> (size, mtime_ns, ctime_ns) done
    children: set[str] = field(default_factory=set)  # subdirectory names that are active
    child_mark: str = ""  # every subdirectory named up to this one has been seen
    has_subdirs: bool = False
    pending: bool = True  # its last listing found files not done yet: list it again


class TreeWatch:
    def __init__(self, root: Path, *, ignore: Callable[[str], bool] = lambda rel: False, mutable: bool = False,
                 settle_s: float = SETTLE_S, sweep_s: float = SWEEP_S, first: tuple[str, ...] = (),
                 now_ns: Callable[[], int] = time.time_ns) -> None:
        self.root = root
        self.ignore = ignore
        self.mutable = mutable
        self.settle_ns = int(settle_s * 1e9)
        self.sweep_ns = int(sweep_s * 1e9)
        self.first = first  # top-level folders looked at before the others (index/ before events/)
        self.now_ns = now_ns
        self.forget()

    def forget(self) -> None:
        """Everything is new again (the storage lost what was uploaded)."""
        self._active: dict[str, _Dir] = {}
        self._retired: dict[str, int] = {}  # retired since the last sweep: rel -> cutoff
        self._watermark = -1  # for directories retired before the last sweep
        self._last_sweep = self.now_ns()

    # -- what the uploader calls ------------------------------------------------------------------
    def changes(self) -> list[Change]:
        """New or changed closed files since the last call (index/ and `first` folders first)."""
        now = self.now_ns()
        if not self.root.is_dir():
            return []
        out: list[Change] = []
        if now - self._last_sweep >= self.sweep_ns:
            self._sweep(now, out, stat_files=False)
        self._visit("", now, out)
        self._retire(now)
        return out

    def final(self) -> list[Change]:
        """Everything not done yet, every directory and file looked at (the final upload)."""
        if not self.root.is_dir():
            return []
        now = self.now_ns()
        out: list[Change] = []
        self._visit("", now, out, full=True)
        self._sweep(now, out, stat_files=True)
        return _unique(out)

    def done(self, change: Change) -> None:
        """`change` was uploaded."""
        parent, _, name = change.rel.rpartition("/")
        d = self._active.get(parent)
        if d is not None:  # else retired meanwhile: its cutoff covers it
            d.files[name] = (*change.signature, change.ctime_ns)

    def examine(self, rel_dir: str) -> list[Change]:
        """The files of `rel_dir` not done yet, now (its index file is about to go up: an events
        file must go first), whether the folder is active or retired."""
        now = self.now_ns()
        out: list[Change] = []
        d = self._active.get(rel_dir)
        if d is None:
            if not (self.root / rel_dir).is_dir():
                return out
            d = self._revive(rel_dir)
        self._list(rel_dir, d, now, out, force=True)
        return out

    def active_dirs(self) -> list[str]:
        """The folders looked at each tick (the rest are retired)."""
        return sorted(self._active)

    # -- internals --------------------------------------------------------------------------------
    def _revive(self, rel: str) -> _Dir:
        cutoff = self._retired.pop(rel, self._watermark)
        d = self._active[rel] = _Dir(cutoff_ns=cutoff)
        parent, _, name = rel.rpartition("/")
        if rel and parent in self._active:
            self._active[parent].children.add(name)
        return d

    def _visit(self, rel: str, now: int, out: list[Change], *, full: bool = False) -> None:
        d = self._active.get(rel)
        if d is None:
            d = self._revive(rel)
        if not self._list(rel, d, now, out, force=full, full=full):
            return
        children = sorted(d.children, key=lambda n: (n not in self.first, n)) if not rel else sorted(d.children)
        for name in children:
            self._visit(f"{rel}/{name}" if rel else name, now, out, full=full)

    def _list(self, rel: str, d: _Dir, now: int, out: list[Change], *, force: bool = False,
              full: bool = False) -> bool:
        """List `rel` if it may have changed; False when it is gone. `full`: stat every file."""
        path = self.root / rel if rel else self.root
        try:
            mtime = os.stat(path).st_mtime_ns
        except FileNotFoundError:
            self._drop(rel)
            return False
        racy = d.mtime_ns >= d.listed_at_ns - RACY_NS
        if force or d.pending or mtime != d.mtime_ns or racy or self.mutable:
            d.mtime_ns, d.listed_at_ns = mtime, now
            d.pending = self._scan(rel, path, d, now, out, full)
        else:
            self._restat_recent(rel, path, d, now, out)
        return True

    def _scan(self, rel: str, path: Path, d: _Dir, now: int, out: list[Change], full: bool) -> bool:
        found = False
        try:
            entries = sorted(os.scandir(path), key=lambda e: e.name)
        except FileNotFoundError:
            return False
        settled = now - self.settle_ns
        for entry in entries:
            child = f"{rel}/{entry.name}" if rel else entry.name
            if entry.is_dir(follow_symlinks=False):
                d.has_subdirs = True
                # a subfolder named up to child_mark is known: active, retired, or covered by the
                # watermark. Not at the root: its folders are never retired, and one may come after
                # a later name (an XGBoost trial's collections/ after its events/ and index/)
                if entry.name not in d.children and (entry.name > d.child_mark or not rel):
                    d.children.add(entry.name)
                    self._active.setdefault(child, _Dir(cutoff_ns=d.cutoff_ns))
                    d.child_mark = max(d.child_mark, entry.name)
                continue
            if entry.name.endswith(TMP_SUFFIX) or self.ignore(child):
                continue
            known = d.files.get(entry.name)
            if known is not None and known[1] < settled and not (full or self.mutable):
                continue  # closed and quiet: not stat'ed again (the final pass does)
            try:
                st = entry.stat()
            except FileNotFoundError:
                continue
            if known is not None and known[:2] == (st.st_size, st.st_mtime_ns):
                continue
            if known is None and st.st_ctime_ns <= d.cutoff_ns:
                d.files[entry.name] = (st.st_size, st.st_mtime_ns, st.st_ctime_ns)  # went up before it retired
                continue
            out.append(Change(child, Path(entry.path), (st.st_size, st.st_mtime_ns), st.st_ctime_ns))
            found = True
        return found

    def _restat_recent(self, rel: str, path: Path, d: _Dir, now: int, out: list[Change]) -> None:
        """Files written in the last settle_s (or all, in a mutable target) may be rewritten in place."""
        for name, (size, mtime, _ctime) in list(d.files.items()):
            if not self.mutable and mtime < now - self.settle_ns:
                continue
            try:
                st = os.stat(path / name)
            except FileNotFoundError:
                del d.files[name]
                continue
            if (st.st_size, st.st_mtime_ns) != (size, mtime):
                out.append(Change(f"{rel}/{name}" if rel else name, path / name, (st.st_size, st.st_mtime_ns),
                                  st.st_ctime_ns))
                d.pending = True

    def _retire(self, now: int) -> None:
        """Forget quiet leaf directories (files only, nothing pending, unchanged for settle_s)."""
        if self.mutable:
            return
        quiet = now - self.settle_ns
        for rel, d in list(self._active.items()):
            if not rel or d.has_subdirs or d.children or d.pending or d.mtime_ns < 0 or d.mtime_ns >= quiet:
                continue
            parent, _, name = rel.rpartition("/")
            up = self._active.get(parent)
            if up is not None and name == up.child_mark:
                continue  # the newest folder of its parent (this step's, this hour's) may still get files
            if any(mtime >= quiet for _size, mtime, _c in d.files.values()):
                continue
            cutoff = max([d.mtime_ns, *(c for _s, _m, c in d.files.values())])
            if cutoff >= quiet:
                continue
            self._retired[rel] = cutoff
            self._drop(rel)

    def _drop(self, rel: str) -> None:
        self._active.pop(rel, None)
        parent, _, name = rel.rpartition("/")
        if rel and parent in self._active:
            self._active[parent].children.discard(name)

    def _sweep(self, now: int, out: list[Change], *, stat_files: bool) -> None:
        """Every directory that is not active: brought back if it changed since it retired (or,
        with `stat_files`, if one of its files did)."""
        for rel in self._walk_inactive():
            cutoff = self._retired.get(rel, self._watermark)
            path = self.root / rel
            try:
                changed = os.stat(path).st_mtime_ns > cutoff
                if not changed and stat_files:
                    changed = any(not e.name.endswith(TMP_SUFFIX) and e.is_file(follow_symlinks=False)
                                  and e.stat().st_ctime_ns > cutoff for e in os.scandir(path))
            except FileNotFoundError:
                continue
            if changed:
                self._revive(rel)
                # with what is under it: its subfolders become active now, and the walk below
                # passes over active folders (the final pass would miss a new folder's files)
                self._visit(rel, now, out, full=True)
        self._retired.clear()
        self._watermark = now - RACY_NS
        self._last_sweep = now

    def _walk_inactive(self) -> Iterator[str]:
        """Relative paths of the directories under root that are not active (depth first)."""
        stack = [""]
        while stack:
            rel = stack.pop()
            try:
                entries = list(os.scandir(self.root / rel if rel else self.root))
            except FileNotFoundError:
                continue
            for e in entries:
                if e.is_dir(follow_symlinks=False):
                    child = f"{rel}/{e.name}" if rel else e.name
                    if child not in self._active:
                        yield child
                    stack.append(child)


def _unique(changes: list[Change]) -> list[Change]:
    seen: dict[str, Change] = {}
    for c in changes:
        seen[c.rel] = c
    return list(seen.values())
