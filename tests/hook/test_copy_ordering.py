"""sdlocal.hook._cuda_copy's ordering on a simulated device, on CPU: the copy stream runs its copies only
when the writer waits for them, i.e. after the optimizer (and in-place modules) changed the
tensors. Saved values must still be those of the step: what makes them so is the device snapshot
taken in stream order where the hook sees the tensor (the module doc of hook._cuda_copy). This
checks the logic (what is copied from, when buffers go back, what is waited for); the real
device, streams and pinned memory are checked by test_cuda_saves.py on a GPU machine."""
from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from sdlocal.hook._budget import ByteBudget
from sdlocal.hook._copier import HostCopier, Snapshot
from sdlocal.hook._cuda_copy import CudaCopier
from sdlocal.hook._saving import SaveOptions
from sdlocal.hook.pytorch import Hook
from sdlocal.trial import create_trial
from sdlocal.trial.modes import ModeKeys
from tests.hook import _saves_workload as wl
from tests.hook.test_async_saves import SignallingCondition, SlowWriter


class FakeEvent:
    def __init__(self) -> None:
        self.done = False
        self.stream: FakeStream | None = None

    def record(self, stream: FakeStream) -> None:
        self.stream = stream
        stream.enqueue(lambda: setattr(self, "done", True))

    def query(self) -> bool:
        return self.done

    def synchronize(self) -> None:
        assert self.stream is not None, "synchronize() on an event never recorded"
        self.stream.run_until(self)


class FakeStream:
    """`immediate`: runs what is enqueued at once (the compute stream: the training thread's own
    CPU ops already ran in order); else keeps it until someone waits for an event after it."""

    def __init__(self, immediate: bool) -> None:
        self.immediate = immediate
        self._ops: deque[Callable[[], None]] = deque()
        self._lock = threading.Lock()

    def enqueue(self, op: Callable[[], None]) -> None:
        if self.immediate:
            op()
        else:
            with self._lock:
                self._ops.append(op)

    def wait_event(self, event: FakeEvent) -> None:
        def check() -> None:
            assert event.done, "the copy stream ran before the event it waits for"

        self.enqueue(check)

    def run_until(self, event: FakeEvent) -> None:
        with self._lock:
            while not event.done:
                self._ops.popleft()()


class FakeOps:
    def __init__(self) -> None:
        self.compute = FakeStream(immediate=True)
        self.side: list[FakeStream] = []
        self.allocs = 0

    def current_stream(self, device: torch.device) -> FakeStream:
        return self.compute

    def new_stream(self, device: torch.device) -> FakeStream:
        self.side.append(FakeStream(immediate=False))
        return self.side[-1]

    def event(self, blocking: bool = False) -> FakeEvent:
        return FakeEvent()

    def copy_async(self, stream: FakeStream, dst: torch.Tensor, src: torch.Tensor) -> None:
        stream.enqueue(lambda: dst.copy_(src))

    def keep_for(self, t: torch.Tensor, stream: FakeStream) -> None:
        pass

    def pinned(self, dtype: torch.dtype, numel: int) -> torch.Tensor:
        self.allocs += 1
        return torch.full((numel,), 7, dtype=dtype)  # not the value: a copy that never ran shows


class ThroughDevice(HostCopier):
    """Every tensor through the CUDA path (on the simulated device)."""

    def snapshot(self, tensor: torch.Tensor) -> Snapshot:
        t = tensor.detach()
        return self._cuda_copier().snapshot(t, tuple(t.shape), t.numel() * t.element_size())


def test_the_copy_reads_the_snapshot_not_the_tensor_the_optimizer_changed() -> None:
    ops = FakeOps()
    copier = CudaCopier(ByteBudget(1 << 20), ops)
    w = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    snap = copier.snapshot(w, (3, 4), 48)
    w.mul_(-1)  # the optimizer, before the copy stream ran
    np.testing.assert_array_equal(snap.value(), np.arange(12, dtype=np.float32).reshape(3, 4))
    snap.release()
    # the pinned buffer came back and is taken again for the next step's copy
    again = copier.snapshot(w, (3, 4), 48)
    assert ops.allocs == 1
    np.testing.assert_array_equal(again.value(), -np.arange(12, dtype=np.float32).reshape(3, 4))


def test_device_copies_are_dropped_once_copied_and_unwaited_buffers_are_not_pooled() -> None:
    ops = FakeOps()
    budget = ByteBudget(1 << 20)
    copier = CudaCopier(budget, ops)
    first = copier.snapshot(torch.ones(4), (4,), 16)
    first.value()  # the writer waited: the copy is done
    copier.snapshot(torch.ones(4), (4,), 16)  # the next snapshot reaps the done ones
    assert first._staged is None  # type: ignore[attr-defined]
    dropped = copier.snapshot(torch.ones(8), (8,), 32)
    dropped.release()  # released unwaited (saved twice in a step): its copy may still be running
    assert not any(b.numel() == 8 for bufs in copier.pool._free.values() for b in bufs)
    assert budget.held == 16 + 16  # first (not yet released) and the second


def test_whole_training_through_the_device_path_saves_the_steps_values(tmp_path: Path) -> None:
    out = tmp_path / "t"
    limit = 150_000
    # the writer holds its first step until the training waits for room: the budget's wait is
    # then certain, whatever the machine's load (a fixed delay raced the training on a busy CI)
    someone_waits = threading.Event()
    hook = Hook(wl.config(out, 1), save_options=SaveOptions(queue_bytes=limit),
                trial_writer=lambda root, worker: SlowWriter(root, worker, delay=0.02, gate=someone_waits))
    hook._saver.budget._cond = SignallingCondition(someone_waits)
    ops = FakeOps()
    hook._saver._copier = ThroughDevice(hook._saver.budget, cuda=CudaCopier(hook._saver.budget, ops))
    by_hand = wl.train(hook, 10)
    tr = create_trial(out)
    for name, by_step in by_hand.items():
        for s, expected in by_step.items():
            np.testing.assert_array_equal(tr.tensor(name).value(s, mode=ModeKeys.TRAIN), expected,
                                          err_msg=f"{name} step {s}")
    stats = hook._saver.stats()
    assert stats.high_water <= limit and stats.waits > 0
    assert ops.allocs < 10 * len(by_hand)  # pinned buffers were reused across steps

