"""Snapshots of the tensors a step saves: private host copies that the writer thread serializes.

The training thread takes a snapshot where the hook sees a tensor (a step's start for weights, a
gradient hook, a module's forward hook); the writer thread calls `value()` (which, on CUDA, waits
for the copy to be done), writes it, then `release()` gives the buffer back for a later step and
frees its bytes in the hook's budget (hook._budget).

Why a copy at all: the optimizer updates weights in place right after the backward, `zero_grad`
and gradient accumulation write into gradients, and in-place modules (`ReLU(inplace=True)`) write
into the previous module's output. A snapshot must hold the value as it was when the hook saw it.

- `HostCopier` (CPU tensors): `buffer.copy_(tensor)` on the training thread, into a host buffer
  of a pool (`HostPool`) reused across steps: after the first saved step no fresh memory is
  touched (a fresh page costs a page fault; a clone() per step paid that every step).
- CUDA tensors: hook._cuda_copy.CudaCopier (device snapshot, copy stream, pinned buffers of a
  pinned `HostPool`; its docstring says why the values are those of the step).
- `CloneCopier`: the synchronous reference (`SaveOptions(asynchronous=False)`): a fresh
  `.to("cpu")` copy on the training thread, written there too. What the asynchronous path must
  match bit for bit (tests/hook/test_async_saves.py).

Memory: a pool's free buffers and the snapshots alive count together against the budget's limit
(`ByteBudget.pooled`); a buffer that would not fit is dropped instead of pooled.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from sdlocal.hook._budget import ByteBudget


class Snapshot:
    """A private copy of one tensor. `value()`: the host value (the writer thread; may wait for
    a device copy); `release()`: give the memory back (once; later calls do nothing)."""

    __slots__ = ("nbytes", "shape", "_budget", "_queued", "_released")

    def __init__(self, nbytes: int, shape: tuple[int, ...], budget: ByteBudget | None) -> None:
        self.nbytes = nbytes
        self.shape = shape
        self._budget = budget
        self._queued = False
        self._released = False

    def value(self) -> torch.Tensor | np.ndarray:
        raise NotImplementedError

    def _free(self) -> None:
        """Give the buffer back (subclasses)."""

    def queued(self) -> None:
        """Handed to the writer: its bytes will be freed by the writer."""
        if self._budget is not None and not self._queued:
            self._budget.queue(self.nbytes)
        self._queued = True

    def release(self) -> None:
        if self._released:
            return
        self._released = True
        self._free()
        if self._budget is not None:
            self._budget.release(self.nbytes, self._queued)


class Ready(Snapshot):
    """A value that is already a private host copy (or numpy data the caller handed over)."""

    __slots__ = ("_value",)

    def __init__(self, value: torch.Tensor | np.ndarray, budget: ByteBudget | None = None,
                 nbytes: int | None = None) -> None:
        super().__init__(_nbytes(value) if nbytes is None else nbytes, tuple(int(d) for d in value.shape), budget)
        self._value = value

    def value(self) -> torch.Tensor | np.ndarray:
        return self._value

    def _free(self) -> None:
        self._value = np.empty(0)


class Rows(Snapshot):
    """Several calls' rows of one tensor in one step (labels/predictions of two loss calls), in
    order; concatenated on the writer thread."""

    __slots__ = ("parts",)

    def __init__(self, parts: list[Snapshot]) -> None:
        first = parts[0].shape
        rows = sum(p.shape[0] for p in parts)
        super().__init__(0, (rows, *first[1:]), None)  # the parts count their own bytes
        self.parts = parts

    def value(self) -> torch.Tensor | np.ndarray:
        return torch.cat([torch.as_tensor(p.value()) for p in self.parts])

    def _free(self) -> None:
        for p in self.parts:
            p.release()

    def queued(self) -> None:
        for p in self.parts:
            p.queued()


def _host_empty(dtype: torch.dtype, numel: int) -> torch.Tensor:
    return torch.empty(numel, dtype=dtype)


class HostPool:
    """Free host buffers (flat tensors), by (dtype, elements), reused across steps; `alloc` makes
    a new one (CUDA: page-locked). Free buffers count in the budget (`budget.pooled`): a take that
    must allocate first drops free buffers of other shapes while memory would exceed the limit,
    and a buffer given back is dropped if keeping it would."""

    def __init__(self, budget: ByteBudget, alloc: Callable[[torch.dtype, int], torch.Tensor] = _host_empty) -> None:
        self._budget = budget
        self._alloc = alloc
        self._free: dict[tuple[torch.dtype, int], list[torch.Tensor]] = {}
        self._lock = threading.Lock()

    def take(self, dtype: torch.dtype, numel: int) -> torch.Tensor:
        key = (dtype, numel)
        with self._lock:
            bufs = self._free.get(key)
            if bufs:
                buf = bufs.pop()
                self._budget.pool_change(-_flat_bytes(buf))
                return buf
            for other in list(self._free):  # make room: free buffers of other shapes go first
                if self._budget.held + self._budget.pooled <= self._budget.limit:
                    break
                for dropped in self._free.pop(other):
                    self._budget.pool_change(-_flat_bytes(dropped))
            self._budget.pool_change(0)  # the high-water mark, with the new buffer held
        return self._alloc(dtype, numel)

    def give(self, buf: torch.Tensor) -> None:
        """`buf` comes back (its snapshot still counted as held: moving it keeps the total)."""
        n = _flat_bytes(buf)
        with self._lock:
            if self._budget.held + self._budget.pooled > self._budget.limit:
                return  # over the limit (a step larger than it): let it go
            self._free.setdefault((buf.dtype, buf.numel()), []).append(buf)
            self._budget.pool_change(n)

    def clear(self) -> None:
        with self._lock:
            for bufs in self._free.values():
                for buf in bufs:
                    self._budget.pool_change(-_flat_bytes(buf))
            self._free.clear()


class HostCopy(Snapshot):
    """A CPU tensor copied into a pooled buffer."""

    __slots__ = ("_buf", "_pool")

    def __init__(self, buf: torch.Tensor, pool: HostPool, shape: tuple[int, ...], budget: ByteBudget) -> None:
        super().__init__(_flat_bytes(buf), shape, budget)
        self._buf: torch.Tensor | None = buf
        self._pool = pool

    def value(self) -> torch.Tensor:
        assert self._buf is not None, "a released snapshot has no value"
        return self._buf.view(self.shape)

    def _free(self) -> None:
        buf, self._buf = self._buf, None
        if buf is not None:
            self._pool.give(buf)


class HostCopier:
    """Asynchronous saves: CPU tensors into pooled buffers; CUDA tensors through a CudaCopier
    (created on first use); any other device (or layout) copied to the host in line."""

    def __init__(self, budget: ByteBudget, cuda: Any = None) -> None:
        self.budget = budget
        self.pool = HostPool(budget)
        self._cuda: Any = cuda  # a CudaCopier (tests: one on a simulated device)
        self._lock = threading.Lock()

    def snapshot(self, tensor: torch.Tensor) -> Snapshot:
        t = tensor.detach()
        shape = tuple(int(d) for d in t.shape)
        nbytes = t.numel() * t.element_size()
        if not _poolable(t):  # sparse, quantized, meta, ...: a plain host copy
            self.budget.acquire(nbytes)
            return Ready(t.to("cpu", copy=True), self.budget, nbytes)
        if t.device.type == "cpu":
            self.budget.acquire(nbytes, from_pool=True)
            try:
                buf = self.pool.take(t.dtype, t.numel())
                buf.view(shape).copy_(t)
            except BaseException:
                self.budget.release(nbytes, False)
                raise
            return HostCopy(buf, self.pool, shape, self.budget)
        if t.device.type == "cuda":
            return self._cuda_copier().snapshot(t, shape, nbytes)
        self.budget.acquire(nbytes)  # mps, xla, ...: their own transfer rules; a blocking copy
        return Ready(t.to("cpu", copy=True), self.budget, nbytes)

    def _cuda_copier(self) -> Any:
        if self._cuda is None:
            with self._lock:
                if self._cuda is None:
                    from sdlocal.hook._cuda_copy import CudaCopier

                    self._cuda = CudaCopier(self.budget)
        return self._cuda

    def clear(self) -> None:
        self.pool.clear()
        if self._cuda is not None:
            self._cuda.clear()


class CloneCopier:
    """The synchronous reference: a fresh host copy on the training thread, nothing pooled."""

    def __init__(self, budget: ByteBudget) -> None:
        self.budget = budget

    def snapshot(self, tensor: torch.Tensor) -> Snapshot:
        t = tensor.detach()
        return Ready(t.clone() if t.device.type == "cpu" else t.to("cpu"))

    def clear(self) -> None:
        pass


_POOLED_DTYPES = frozenset((torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8, torch.int16,
                            torch.int32, torch.int64, torch.uint8, torch.bool, torch.complex64, torch.complex128))


def _poolable(t: torch.Tensor) -> bool:
    return t.layout == torch.strided and not t.is_quantized and t.dtype in _POOLED_DTYPES and t.device.type != "meta"


def _flat_bytes(buf: torch.Tensor) -> int:
    return buf.numel() * buf.element_size()


def _nbytes(value: torch.Tensor | np.ndarray) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    return int(np.asarray(value).nbytes)
