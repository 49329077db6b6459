"""How the PyTorch hook gets a step's tensors to disk: copies, the byte budget, the writer.

`SaveOptions` (a frozen config): `queue_bytes`, the most memory the hook's tensor copies may take
(live snapshots plus pooled free buffers; default 1 GiB, `SDLOCAL_HOOK_QUEUE_BYTES`, e.g. `512M`,
`2G` or a number of bytes); `asynchronous` (default True: copies into reused buffers, CUDA copies
on a copy stream, serialization and writes on a writer thread; False: the synchronous reference,
a fresh host copy and the write on the training thread); `wait_deadline_s`, how long the training
may wait for the writer to make room before the hook gives up with a HookWriteError.

`Saver` puts the pieces together: `snapshot(tensor)` on the training thread (it may wait there
for room: back-pressure), `submit(job, held)` at a step's end, `close()` and `report()`, which
logs the total time the training waited for the writer in one line.
"""
from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from sdlocal.hook._async_writer import AsyncWriter, InlineWriter, Job
from sdlocal.hook._budget import BudgetStats, ByteBudget
from sdlocal.hook._copier import CloneCopier, HostCopier, Ready, Snapshot
from sdlocal.hook.errors import HookConfigError

logger = logging.getLogger(__name__)

QUEUE_BYTES_ENV = "SDLOCAL_HOOK_QUEUE_BYTES"
DEFAULT_QUEUE_BYTES = 1 << 30
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)


def parse_bytes(text: str, field: str) -> int:
    """`1073741824`, `512M`, `2G`, `512MiB` (binary units) -> bytes; HookConfigError naming `field`."""
    m = _SIZE.match(text)
    if m is None or int(m.group(1)) < 1:
        raise HookConfigError(field, f"expected a positive size in bytes (e.g. 1073741824, 512M, 2G), got {text!r}")
    return int(m.group(1)) * _UNITS[m.group(2).upper()]


@dataclass(frozen=True)
class SaveOptions:
    queue_bytes: int = DEFAULT_QUEUE_BYTES
    asynchronous: bool = True
    wait_deadline_s: float = 600.0

    def __post_init__(self) -> None:
        if self.queue_bytes < 1:
            raise HookConfigError("queue_bytes", f"must be at least 1 byte, got {self.queue_bytes}")
        if self.wait_deadline_s <= 0:
            raise HookConfigError("wait_deadline_s", f"must be positive, got {self.wait_deadline_s}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> SaveOptions:
        env = os.environ if environ is None else environ
        text = env.get(QUEUE_BYTES_ENV, "").strip()
        return cls(queue_bytes=parse_bytes(text, QUEUE_BYTES_ENV)) if text else cls()


class Saver:
    """Copies, budget and writer of one hook. The writer thread starts with the first submit."""

    def __init__(self, options: SaveOptions, max_pending_steps: int = 16) -> None:
        self.options = options
        self.budget = ByteBudget(options.queue_bytes, options.wait_deadline_s)
        self.budget.on_first_wait = self._first_wait
        self._copier = HostCopier(self.budget) if options.asynchronous else CloneCopier(self.budget)
        self._max_pending = max_pending_steps
        self._writer: AsyncWriter | InlineWriter | None = None

    def snapshot(self, value: Any) -> Snapshot:
        """A private copy of `value` (a tensor; numpy data is taken as it is, the caller's own)."""
        if isinstance(value, torch.Tensor):
            return self._copier.snapshot(value)
        return Ready(np.asarray(value))

    @property
    def writer(self) -> AsyncWriter | InlineWriter:
        if self._writer is None:
            self._writer = (AsyncWriter(self._max_pending, budget=self.budget) if self.options.asynchronous
                            else InlineWriter())
        return self._writer

    def submit(self, job: Job, held: list[Snapshot] | tuple[Snapshot, ...] = ()) -> None:
        self.writer.submit(job, held)

    def stats(self) -> BudgetStats:
        return self.budget.stats()

    def close(self) -> None:
        """Drain and stop the writer (raises HookWriteError if a write failed); free the pools."""
        try:
            self.writer.close()
        finally:
            self._copier.clear()
            self.report()

    def report(self) -> None:
        st = self.budget.stats()
        if st.waits:
            logger.warning(
                "sdlocal hook: the training waited %.2f s in total (%d times) for the writer to make room: "
                "the output folder took the saved tensors more slowly than the training produced them "
                "(queue limit %s, %s; most held at once %s)", st.waited_s, st.waits, _size(st.limit),
                QUEUE_BYTES_ENV, _size(st.high_water))
        if st.over_limit:
            logger.warning("sdlocal hook: %d time(s) one step's tensors alone took more than the queue limit "
                           "(%s, %s): the hook held %s at most", st.over_limit, _size(st.limit), QUEUE_BYTES_ENV,
                           _size(st.high_water))

    def _first_wait(self) -> None:
        logger.info("sdlocal hook: the writer is behind; the training waits for it (queue limit %s, %s); "
                    "the total wait is reported when the hook closes", _size(self.budget.limit), QUEUE_BYTES_ENV)


def _size(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"
