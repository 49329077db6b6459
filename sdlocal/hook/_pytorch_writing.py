"""The PyTorch hook's way to storage: a step's snapshots handed to the writer (hook._saving) with
their plans, the collections file, TensorBoard, closing, and the zero-code hook's hand-over to a
hook the script creates (hook/_pytorch_state.py says how the parts of `Hook` fit)."""
from __future__ import annotations

import atexit
import logging
from collections.abc import Callable

import numpy as np

from sdlocal.hook import _current
from sdlocal.hook._copier import Ready, Snapshot
from sdlocal.hook._pytorch_state import HookState, rank_and_world
from sdlocal.hook._saving import Saver
from sdlocal.hook._serialize import (
    RAW_ONLY,
    Batch,
    CloseJob,
    CollectionsJob,
    EndMarkerJob,
    StepJob,
    TensorBoardJob,
)
from sdlocal.hook._tensorboard import TensorBoardWriter
from sdlocal.hook.errors import HookError
from sdlocal.hook.step_record import write_record
from sdlocal.trial.collection import Collection
from sdlocal.trial.modes import ModeKeys

logger = logging.getLogger("sdlocal.hook.pytorch")


class Writing(HookState):
    def _ensure_writer(self) -> Saver:
        if not self._writer_started:
            self._writer_started = True
            rank, world = rank_and_world()
            if self.config.include_workers == "all":
                self._num_workers = world
            elif rank != 0:  # smdebug's include_workers="one": only rank 0 writes, the trial has one worker
                self._write_enabled = False
            if self._write_enabled and not _current.claim(self.out_dir, self):
                self._write_enabled = False
                logger.warning("sdlocal hook: another hook of this process already writes to %s; this one "
                               "writes nothing (one hook writes per folder)", self.out_dir)
            self._trial_writer = self._make_trial_writer(self.out_dir, f"worker_{rank}")
            if self._write_enabled and self._tb_dir is not None:
                self._tb = TensorBoardWriter(self._tb_dir, f"worker_{rank}")
        return self._saver

    def _end_step(self) -> None:
        pending, self._pending = self._pending, {}
        self._io_counts = {}
        if not pending or not self._started:
            self._pending = pending  # before our first step: carried into it
            return
        writer = self._ensure_writer()
        snaps = {name: (value if isinstance(value, Snapshot) else Ready(value), mask)
                 for name, (value, mask) in pending.items()}
        if not self._write_enabled:
            for snap, _ in snaps.values():
                snap.release()
            return
        items = []
        saved = 0  # the collections this step saved a tensor of (the step record)
        for name, (snap, mask) in snaps.items():
            saved |= mask
            items.append((name, snap, self._plan(mask) if mask else RAW_ONLY))
            if self._seen.get(name, 0) | mask != self._seen.get(name, 0):
                self._seen[name] = self._seen.get(name, 0) | mask
                for bit, coll in enumerate(self._colls):
                    if mask & (1 << bit):
                        self._tensor_names.setdefault(coll.name, set()).add(name)
                self._collections_dirty = True
        self._steps.saved(saved)
        assert self._trial_writer is not None
        job: Callable[[], None] = StepJob(self._trial_writer, self.step, self.mode, self._mode_step, tuple(items))
        if self._tb is not None:
            job = Batch((job, self._tensorboard_job(snaps)))
        writer.submit(job, [snap for snap, _ in snaps.values()])
        self.last_saved_step = self.step
        if self._collections_dirty:
            self._submit_collections()

    def _tensorboard_job(self, snaps: dict[str, tuple[Snapshot, int]]) -> TensorBoardJob:
        """Scalars (single values: losses, metrics, save_scalar) and histograms (tensors of
        collections with save_histogram: weights, gradients, ...) of this step, for TensorBoard."""
        scalars, histograms = [], []
        for name, (snap, mask) in snaps.items():
            if int(np.prod(snap.shape)) == 1:
                scalars.append((name, snap))
            elif any(mask & (1 << bit) and coll.save_histogram for bit, coll in enumerate(self._colls)):
                histograms.append((name, snap))
        prefix = "" if self.mode == ModeKeys.GLOBAL else f"{self.mode.name.lower()}/"
        assert self._tb is not None
        return TensorBoardJob(self._tb, self.step, prefix, tuple(scalars), tuple(histograms))

    def _submit_collections(self) -> None:
        writer = self._ensure_writer()
        if not self._write_enabled:
            return
        assert self._trial_writer is not None
        colls = dict(self._inherited)
        colls.update({c.name: c for c in self.config.collections})
        colls.update({c.name: c for c in self._colls})
        objs = tuple(Collection.from_dict(c.to_dict(sorted(self._tensor_names.get(n, ()))))
                     for n, c in colls.items())
        writer.submit(CollectionsJob(self._trial_writer, objs, self._num_workers))
        self._collections_dirty = False

    def _remove_handles(self) -> None:
        for h in [self._step_handle, self._timeline_handle, *self._attach_handles]:
            if h is not None:
                h.remove()
        self._step_handle, self._timeline_handle, self._attach_handles = None, None, []
        if self._records is not None:
            self._records.close()
        atexit.unregister(self._close_at_exit)

    def close(self) -> None:
        """Write what is pending, the collections file and the end marker; stop the writer.
        Raises HookWriteError if any write failed. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._remove_handles()
        try:
            if self._pending and not self._started:  # saved before any step: that is one step
                self.step += 1
                self._started = True
                self.mode, self._mode_step = ModeKeys.GLOBAL, self.step
            self._end_step()
            writer = self._ensure_writer()
            if self._write_enabled:
                self._submit_collections()
                assert self._trial_writer is not None
                writer.submit(EndMarkerJob(self._trial_writer))
            if self._tb is not None:
                writer.submit(CloseJob(self._tb))
            writer.close()
            if self._write_enabled:
                self._write_step_record()
        finally:
            _current.release(self.out_dir, self)
            if self._timeline is not None:
                self._timeline.close()  # the timeline's files get their final names too

    def _write_step_record(self) -> None:
        modes = {m.name: n + 1 for m, n in self.mode_steps.items() if n >= 0 and m != ModeKeys.GLOBAL}
        try:
            names = [c.name for c in self._colls]
            write_record(self.out_dir, self.step + 1, modes, self._steps.scheduled(names), self._steps.saved_steps(names))
        except OSError as e:  # only a warning is lost (the launcher's steps-to-judge check)
            logger.warning("sdlocal hook: cannot write the step record in %s: %s", self.out_dir, e)

    def _hand_over_to(self, new: Writing) -> None:
        """The zero-code hook stops for `new`, the hook the script created: it writes its current
        step and collections (no end marker when `new` writes to the same folder) and `new`
        continues its step count there, so no file is lost or overwritten."""
        same = _current.same_dir(self.out_dir, new.out_dir)
        self._closed = self.handed_over = True
        self._remove_handles()
        try:
            if self._started and self._pending:
                self._end_step()
            if self._writer_started:
                if self._write_enabled:
                    self._submit_collections()
                    if not same:
                        assert self._trial_writer is not None
                        self._saver.submit(EndMarkerJob(self._trial_writer))
                if self._tb is not None:
                    self._saver.submit(CloseJob(self._tb))
                self._saver.close()
        except HookError as e:
            logger.error("sdlocal hook: the zero-code hook failed to write: %s", e)
        finally:
            _current.release(self.out_dir, self)
        logger.info("sdlocal hook: the script's own hook takes over from the zero-code hook after step %d",
                    self.step)
        if same:
            new._continue_from(self)

    def _continue_from(self, previous: Writing) -> None:
        self.step = previous.step
        self._steps.carried.update(previous._steps.scheduled(c.name for c in previous._colls))
        self._steps.carried_saved.update(previous._steps.saved_steps(c.name for c in previous._colls))
        self.mode_steps = dict(previous.mode_steps)
        self.last_saved_step = previous.last_saved_step
        own = {c.name for c in self.config.collections}
        for c in (*previous.config.collections, *previous._colls):
            if c.name not in own:
                self._inherited[c.name] = c
        for name, names in previous._tensor_names.items():
            self._tensor_names.setdefault(name, set()).update(names)
        self._collections_dirty = True

    def _close_at_exit(self) -> None:
        try:
            self.close()
        except HookError as e:
            logger.error("sdlocal hook: %s", e)
