"""The asynchronous save path on CUDA tensors (hook._cuda_copy): device snapshot, copy stream,
pinned buffers. Skipped where no CUDA device is present (a skip is never a pass: the figures and
claims of issue 22 need a run of this file on a GPU machine).

On a GPU machine, without pytest: `python tests/hook/test_cuda_saves.py` runs the same tests and
prints one line per test (benchmarks/gpu_session.sh does, before the benchmark)."""
from __future__ import annotations

import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repository root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402
import torch  # noqa: E402

try:
    import pytest
except ImportError:  # run as a script on a GPU machine without pytest
    pytest = None  # type: ignore[assignment]

from sdlocal.hook._saving import SaveOptions  # noqa: E402
from sdlocal.hook.pytorch import Hook  # noqa: E402
from sdlocal.trial import create_trial  # noqa: E402
from sdlocal.trial.modes import ModeKeys  # noqa: E402
from sdlocal.trial.writer import TrialWriter  # noqa: E402
from tests.hook import _saves_workload as wl  # noqa: E402

if pytest is not None:
    pytestmark = [pytest.mark.gpu,
                  pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (none here)")]


class _GatedWriter(TrialWriter):
    """Writes nothing until `gate` is set: the writer falls behind for as long as the test wants."""

    def __init__(self, root: str | Path, worker: str, gate: threading.Event) -> None:
        super().__init__(root, worker)
        self.gate = gate

    def write_step(self, *args: Any, **kwargs: Any) -> Path | None:
        self.gate.wait(120)
        return super().write_step(*args, **kwargs)


def _train(out: Path, options: SaveOptions | None, steps: int = 6, no_sync: bool = False,
           writer: Any = None) -> tuple[Hook, dict[str, dict[int, np.ndarray]]]:
    hook = Hook(wl.config(out, 1), save_options=options, trial_writer=writer)
    # no_sync: sync debug mode "error" over the steps: any synchronizing call on the training
    # thread (a blocking copy, .item(), synchronize()) raises. The writer thread's Event.synchronize
    # is not one of them (it does not go through torch's sync check).
    return hook, wl.train(hook, steps, device="cuda", forbid_sync=no_sync)


def test_cuda_values_are_those_of_the_step_without_synchronizing(tmp_path: Path) -> None:
    hook, by_hand = _train(tmp_path / "async", None, no_sync=True)
    copier = hook._saver._copier
    assert copier._cuda is not None  # the CUDA path ran, not a fallback
    tr = create_trial(tmp_path / "async")
    for name, by_step in by_hand.items():
        for s, expected in by_step.items():
            np.testing.assert_array_equal(tr.tensor(name).value(s, mode=ModeKeys.TRAIN), expected,
                                          err_msg=f"{name} step {s}")
    # ReLU(inplace=True) overwrote fc0's output on the device right after the snapshot
    assert (tr.tensor("fc0_output_0").value(2) < 0).any()


def test_cuda_async_is_bit_identical_to_the_synchronous_path(tmp_path: Path) -> None:
    _train(tmp_path / "sync", SaveOptions(asynchronous=False))
    _train(tmp_path / "async", None)
    sync, async_ = wl.all_values(tmp_path / "sync"), wl.all_values(tmp_path / "async")
    assert sorted(sync) == sorted(async_) and len(sync) > 50
    for key in sync:
        assert wl.digest(async_[key]) == wl.digest(sync[key]), key


def test_cuda_copies_stay_within_the_byte_limit_and_reuse_pinned_buffers(tmp_path: Path) -> None:
    gate = threading.Event()
    timer = threading.Timer(1.0, gate.set)  # the writer is stuck for a second, then writes
    timer.start()
    limit = 150_000  # about 3 steps of the workload
    hook, by_hand = _train(tmp_path / "t", SaveOptions(queue_bytes=limit), steps=12,
                           writer=lambda root, worker: _GatedWriter(root, worker, gate))
    timer.join()
    stats = hook._saver.stats()
    assert stats.high_water <= limit and stats.waits > 0 and stats.waited_s > 0.5
    w = create_trial(tmp_path / "t").tensor("Sequential_fc1.weight")
    np.testing.assert_array_equal(w.value(11, mode=ModeKeys.TRAIN), by_hand["Sequential_fc1.weight"][11])


def test_pinned_pool_buffers_are_page_locked(tmp_path: Path) -> None:
    from sdlocal.hook._copier import HostCopier

    budget_hook = Hook(wl.config(tmp_path / "t", 1))
    copier = budget_hook._saver._copier
    assert isinstance(copier, HostCopier)
    snap = copier.snapshot(torch.arange(1000, device="cuda", dtype=torch.float32))
    np.testing.assert_array_equal(np.asarray(snap.value()), np.arange(1000, dtype=np.float32))
    snap.release()
    pool = copier._cuda.pool
    [buf] = [b for bufs in pool._free.values() for b in bufs]
    assert buf.is_pinned()
    again = copier.snapshot(torch.ones(1000, device="cuda"))
    assert again.value().data_ptr() == buf.data_ptr()  # the same pinned buffer, reused
    again.release()
    budget_hook.close()


if __name__ == "__main__":
    if not torch.cuda.is_available():
        print("SKIP tests/hook/test_cuda_saves.py: no CUDA device")
        sys.exit(0)
    failed = 0
    for test in (test_cuda_values_are_those_of_the_step_without_synchronizing,
                 test_cuda_async_is_bit_identical_to_the_synchronous_path,
                 test_cuda_copies_stay_within_the_byte_limit_and_reuse_pinned_buffers,
                 test_pinned_pool_buffers_are_page_locked):
        with tempfile.TemporaryDirectory() as tmp:
            try:
                test(Path(tmp))
                print(f"PASS {test.__name__}")
            except Exception as e:  # report every test, then fail
                failed += 1
                print(f"FAIL {test.__name__}: {e!r}")
    sys.exit(1 if failed else 0)
