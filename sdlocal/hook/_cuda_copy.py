"""CUDA tensors leave the device without stalling the training thread or the compute stream.

For each tensor the hook saves, on the thread where the hook sees it:

1. `staged = tensor.clone()`, enqueued on the current (compute) stream of the tensor's device;
2. an event `ready` recorded on that stream right after the clone;
3. on a copy stream of our own (one per device): wait for `ready`, then copy `staged` into a
   pinned host buffer (`non_blocking=True`, a true asynchronous D2H copy), then record `done`;
4. the writer thread calls `done.synchronize()` (a blocking event: it sleeps, it does not spin)
   before it reads the host buffer, serializes and writes it.

Why the saved values are exactly those of the step. A CUDA stream runs its kernels in the order
they were enqueued. The clone is enqueued at the moment the hook runs: every kernel that produced
the value (the forward, the backward that wrote the gradient) was enqueued earlier on the same
stream and has finished before the clone reads; every kernel that may change it later (the
optimizer's in-place update, `zero_grad`, gradient accumulation, an in-place ReLU on a module's
output) is enqueued later on that stream and runs after the clone. `staged` is referenced by
nobody else, so no kernel ever writes it after the clone; the copy stream reads it only after
`ready`, i.e. after the clone has finished. Hence the host buffer holds the value the tensor had
when the hook saw it, bit for bit (a copy converts nothing).

Why this design and not "copy the tensor itself, and make the compute stream wait for the copy
before the optimizer": that needs a hook point after every value is final and before anything may
write it again. For weights and gradients the optimizer step could be one (torch's global optimizer
hooks), but not every update goes through torch.optim (a manual `p -= lr * p.grad`, fused or
third-party optimizers), and for module outputs there is none: ResNet's `ReLU(inplace=True)`
overwrites the batch norm's output as soon as the next kernel runs. The clone is correct without
knowing what runs later. Its cost: a device-to-device copy (at the device's memory bandwidth, two
orders of magnitude faster than the device-to-host copy) and device memory for the copies in
flight, freed as soon as their D2H copy is done (checked, without blocking, at each snapshot).

Nothing here synchronizes the training thread with the device: no `torch.cuda.synchronize()`, no
blocking copy, no `.item()`. The compute stream never waits for the copy stream, so the device
copies overlap with the following kernels. Memory: each snapshot's pinned buffer is counted in the
hook's byte budget (hook._budget), so the training thread waits there when the writer falls
behind; device copies in flight never exceed the host bytes held. Pinned buffers come from a
pinned HostPool and are reused across steps once the writer has written them. A snapshot released
before its copy was waited for (dropped unsaved) does not go back to the pool: torch's pinned
allocator keeps such a buffer until the copy that writes it is done.

Several devices: each has its own copy stream; events are recorded on the tensor's device's
current stream. Tensors on other streams than the current one (user-managed streams) are cloned
on the current stream: the user must order them as for any other consumer.

The device calls go through `CudaOps` (torch.cuda's streams, events, pinned memory): the tests
put a simulated device there, whose copy stream runs its copies only when the writer waits for
them (after the optimizer has changed the tensors), to check this ordering on a machine without
a GPU (tests/hook/test_copy_ordering.py).
"""
from __future__ import annotations

import threading
from collections import deque
from typing import Any

import torch

from sdlocal.hook._budget import ByteBudget
from sdlocal.hook._copier import HostPool, Snapshot


class CudaOps:
    """The device calls CudaCopier makes. Streams and events are torch.cuda's (a stand-in needs
    `record(stream)`, `query()`, `synchronize()` on events and `wait_event(event)` on streams)."""

    def current_stream(self, device: torch.device) -> Any:
        return torch.cuda.current_stream(device)

    def new_stream(self, device: torch.device) -> Any:
        return torch.cuda.Stream(device=device)

    def event(self, blocking: bool = False) -> Any:
        return torch.cuda.Event(blocking=blocking)

    def copy_async(self, stream: Any, dst: torch.Tensor, src: torch.Tensor) -> None:
        with torch.cuda.stream(stream):
            dst.copy_(src, non_blocking=True)

    def keep_for(self, t: torch.Tensor, stream: Any) -> None:
        t.record_stream(stream)  # the allocator must not hand its memory out before `stream` read it

    def pinned(self, dtype: torch.dtype, numel: int) -> torch.Tensor:
        return torch.empty(numel, dtype=dtype, pin_memory=True)


class CudaCopy(Snapshot):
    __slots__ = ("_host", "_done", "_staged", "_pool", "_waited")

    def __init__(self, host: torch.Tensor, shape: tuple[int, ...], done: Any, staged: torch.Tensor,
                 pool: HostPool, budget: ByteBudget) -> None:
        super().__init__(host.numel() * host.element_size(), shape, budget)
        self._host: torch.Tensor | None = host
        self._done = done
        self._staged: torch.Tensor | None = staged
        self._pool = pool
        self._waited = False

    def copied(self) -> bool:
        """Whether the D2H copy has finished (non-blocking)."""
        return self._waited or bool(self._done.query())

    def drop_staged(self) -> None:
        self._staged = None  # its memory goes back to torch's caching allocator (record_stream'ed)

    def value(self) -> torch.Tensor:
        assert self._host is not None, "a released snapshot has no value"
        if not self._waited:
            self._done.synchronize()  # the writer thread waits here, never the training thread
            self._waited = True
            self._staged = None
        return self._host.view(self.shape)

    def _free(self) -> None:
        host, self._host = self._host, None
        self._staged = None
        if host is not None and self._waited:
            self._pool.give(host)


class CudaCopier:
    def __init__(self, budget: ByteBudget, ops: CudaOps | None = None) -> None:
        self.budget = budget
        self.ops = ops if ops is not None else CudaOps()
        self.pool = HostPool(budget, self.ops.pinned)
        self._streams: dict[torch.device, Any] = {}
        self._in_flight: deque[CudaCopy] = deque()
        self._lock = threading.Lock()  # gradients may arrive on autograd's device threads

    def snapshot(self, t: torch.Tensor, shape: tuple[int, ...], nbytes: int) -> Snapshot:
        self._reap()
        self.budget.acquire(nbytes, from_pool=True)
        ops = self.ops
        try:
            compute = ops.current_stream(t.device)
            staged = t.clone(memory_format=torch.contiguous_format)  # on `compute`: see the module doc
            ready = ops.event()
            ready.record(compute)
            side = self._stream(t.device)
            host = self.pool.take(t.dtype, t.numel())
            side.wait_event(ready)
            ops.copy_async(side, host.view(shape), staged)
            done = ops.event(blocking=True)  # the writer sleeps in its synchronize(), it does not spin
            done.record(side)
            ops.keep_for(staged, side)
        except BaseException:
            self.budget.release(nbytes, False)
            raise
        snap = CudaCopy(host, shape, done, staged, self.pool, self.budget)
        with self._lock:
            self._in_flight.append(snap)
        return snap

    def _stream(self, device: torch.device) -> Any:
        stream = self._streams.get(device)
        if stream is None:
            stream = self._streams[device] = self.ops.new_stream(device)
        return stream

    def _reap(self) -> None:
        """Drop the device copies whose D2H copy is done (oldest first; stops at the first not done)."""
        with self._lock:
            while self._in_flight and self._in_flight[0].copied():
                self._in_flight.popleft().drop_staged()

    def clear(self) -> None:
        with self._lock:
            self._in_flight.clear()
        self.pool.clear()
