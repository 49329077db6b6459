"""The asynchronous save path (hook._saving, hook._copier, hook._budget) on CPU tensors: the values
are those of the step, bit for bit those of the synchronous path, read back by our reader and by
the real smdebug reader; memory stays within the byte limit when the writer is slowed on purpose,
and the wait is reported once."""
from __future__ import annotations

import json
import logging
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from sdlocal.hook._budget import ByteBudget
from sdlocal.hook._saving import QUEUE_BYTES_ENV, SaveOptions, parse_bytes
from sdlocal.hook.errors import HookConfigError, HookWriteError
from sdlocal.hook.pytorch import Hook
from sdlocal.trial import create_trial
from sdlocal.trial.modes import ModeKeys
from sdlocal.trial.writer import TrialWriter
from tests.hook import _saves_workload as wl

SYNC = SaveOptions(asynchronous=False)


class SlowWriter(TrialWriter):
    """Storage that takes `delay` seconds per step file (a slow disk), counting the steps."""

    def __init__(self, root: str | Path, worker: str = "worker_0", delay: float = 0.0,
                 gate: threading.Event | None = None, until: Callable[[], bool] | None = None) -> None:
        """`gate`: the first step waits until it is set (up to 60 s); `until`: every step waits
        until it says so (up to 60 s), then clears `gate`."""
        super().__init__(root, worker)
        self.delay = delay
        self.gate = gate
        self.until = until
        self.steps_written = 0

    def write_step(self, *args: Any, **kwargs: Any) -> Path | None:
        if self.until is not None:
            deadline = time.monotonic() + 60
            while not self.until() and time.monotonic() < deadline:
                time.sleep(0.005)
            if self.gate is not None:
                self.gate.clear()
        elif self.gate is not None:
            self.gate.wait(60)
        time.sleep(self.delay)
        self.steps_written += 1
        return super().write_step(*args, **kwargs)


class SignallingCondition(threading.Condition):
    """A condition that says when a thread starts waiting on it: put in place of a hook's
    budget condition, it tells a test writer that the training waits for room."""

    def __init__(self, waiting: threading.Event) -> None:
        super().__init__()
        self.waiting = waiting

    def wait(self, timeout: float | None = None) -> bool:
        self.waiting.set()
        return super().wait(timeout)


def _run(out: Path, interval: int, steps: int, options: SaveOptions | None = None,
         writer: Any = None) -> tuple[Hook, dict[str, dict[int, np.ndarray]]]:
    hook = Hook(wl.config(out, interval), save_options=options, trial_writer=writer)
    return hook, wl.train(hook, steps)


def _run_behind(out: Path, steps: int, limit: int, delay: float) -> tuple[Hook, dict[str, dict[int, np.ndarray]]]:
    """A training at save_interval 1 whose writer writes a step only while the training waits for
    room (or once it closes the hook): slower than the training whatever the machine's load (a
    fixed delay alone lost that race on a loaded machine)."""
    training_waits = threading.Event()
    hook = Hook(wl.config(out, 1), save_options=SaveOptions(queue_bytes=limit),
                trial_writer=lambda root, worker: SlowWriter(
                    root, worker, delay=delay, gate=training_waits,
                    until=lambda: training_waits.is_set() or hook.closed))
    hook._saver.budget._cond = SignallingCondition(training_waits)
    return hook, wl.train(hook, steps)


def _step_bytes(path: Path, step: int) -> int:
    """Bytes of the raw values the hook snapshots at one step (read back from a trial)."""
    tr = create_trial(path)
    total = 0
    for name in tr.tensor_names():
        t = tr.tensor(name)
        if step in t.steps():
            try:
                total += t.value(step).nbytes
            except Exception:
                total += 16 * 4 * 4  # head_output_0: reductions only, but snapshotted whole (16 x 4 float32)
    return total


@pytest.mark.parametrize("interval", [1, 3])
def test_async_values_are_bit_identical_to_the_synchronous_path(tmp_path: Path, interval: int) -> None:
    _run(tmp_path / "sync", interval, 7, SYNC)
    _run(tmp_path / "async", interval, 7)
    sync, async_ = wl.all_values(tmp_path / "sync"), wl.all_values(tmp_path / "async")
    assert sorted(sync) == sorted(async_)
    kinds = {name.split("/")[0] if name.startswith("gradient/") else name for name, _ in sync}
    assert {"gradient", "Sequential_fc0.weight", "CrossEntropyLoss_output_1", "CrossEntropyLoss_labels",
            "relu_output_0", "fc0_output_0", "scalar/lr", "head_output_0/mean", "head_output_0/abs_max"} <= kinds
    train_steps = sorted({s for (n, s) in sync if n == "Sequential_fc0.weight"})
    assert train_steps == [s for s in range(7) if s % interval == 0] + [7]  # and EVAL step 0 (global 7)
    for key in sync:
        assert wl.digest(async_[key]) == wl.digest(sync[key]), key


def test_values_are_those_of_the_step_although_the_optimizer_changes_them_in_place(tmp_path: Path) -> None:
    # a slow writer and a small queue: buffers are reused while older steps wait to be written
    out = tmp_path / "t"
    hook, by_hand = _run_behind(out, 12, 150_000, delay=0.05)  # about 3 steps
    assert hook._saver.stats().waits > 0  # the pool's buffers were taken again while the writer lagged
    tr = create_trial(out)
    for name, by_step in by_hand.items():
        t = tr.tensor(name)
        for s, expected in by_step.items():
            np.testing.assert_array_equal(t.value(s, mode=ModeKeys.TRAIN), expected, err_msg=f"{name} step {s}")
    # the weights did change from step to step, and fc0's output is saved before ReLU overwrote it
    w = tr.tensor("Sequential_fc0.weight")
    assert not np.array_equal(w.value(0), w.value(11))
    assert (tr.tensor("fc0_output_0").value(3) < 0).any()
    assert (tr.tensor("relu_output_0").value(3) >= 0).all()


def test_smdebug_reads_the_asynchronous_trial_with_the_synchronous_values(tmp_path: Path,
                                                                         smdebug_python: Path) -> None:
    _run(tmp_path / "sync", 1, 4, SYNC)
    _run(tmp_path / "async", 1, 4)
    proc = subprocess.run([str(smdebug_python), "-c", wl.SMDEBUG_DIGESTS, str(tmp_path / "async")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    theirs = json.loads(proc.stdout.strip().splitlines()[-1])
    ours = {f"{name}@{s}": wl.digest(v) for (name, s), v in wl.all_values(tmp_path / "sync").items()
            if "/" not in name or name.startswith(("gradient/", "scalar/"))}
    assert theirs == ours
    assert len(theirs) > 50


def test_memory_stays_within_the_byte_limit_when_the_writer_is_slow(tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    _run(tmp_path / "sync", 1, 2, SYNC)
    step = _step_bytes(tmp_path / "sync", 1)
    limit = 3 * step + step // 2
    caplog.set_level(logging.INFO, logger="sdlocal.hook")
    hook, by_hand = _run_behind(tmp_path / "slow", 30, limit, delay=0.03)
    stats = hook._saver.stats()
    assert stats.high_water <= limit
    assert stats.high_water > 2 * step  # the queue did fill up: the bound was what held it
    assert stats.over_limit == 0
    assert stats.waits >= 5 and stats.waited_s > 0.1
    totals = [r.getMessage() for r in caplog.records if "in total" in r.getMessage()]
    assert len(totals) == 1, totals  # one line with the total, not one per step
    assert f"{stats.waited_s:.2f} s in total ({stats.waits} times)" in totals[0]
    assert QUEUE_BYTES_ENV in totals[0]
    tr = create_trial(tmp_path / "slow")
    assert tr.tensor("Sequential_fc1.weight").steps(mode=ModeKeys.TRAIN) == list(range(30))
    np.testing.assert_array_equal(tr.tensor("Sequential_fc1.weight").value(29), by_hand["Sequential_fc1.weight"][29])


def test_a_step_larger_than_the_limit_goes_through_alone_and_is_reported(tmp_path: Path,
                                                                         caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="sdlocal.hook")
    hook, by_hand = _run(tmp_path / "t", 1, 4, SaveOptions(queue_bytes=4096),
                         lambda root, worker: SlowWriter(root, worker, delay=0.01))
    stats = hook._saver.stats()
    assert stats.over_limit > 0
    assert any("more than the queue limit" in r.getMessage() for r in caplog.records)
    np.testing.assert_array_equal(create_trial(tmp_path / "t").tensor("Sequential_head.weight").value(3),
                                  by_hand["Sequential_head.weight"][3])


def test_a_failed_writer_never_blocks_the_training(tmp_path: Path) -> None:
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("")
    hook = Hook(wl.config(blocker / "trial", 1), save_options=SaveOptions(queue_bytes=50_000))
    with pytest.raises(HookWriteError):
        wl.train(hook, 20)  # close() raises; the 20 steps ran through although nothing was freed by writing
    assert hook._saver.budget.held == 0  # every snapshot was released


def test_a_hung_writer_stops_the_training_at_the_deadline(tmp_path: Path) -> None:
    gate = threading.Event()
    hook = Hook(wl.config(tmp_path / "t", 1), save_options=SaveOptions(queue_bytes=50_000, wait_deadline_s=0.5),
                trial_writer=lambda root, worker: SlowWriter(root, worker, gate=gate))
    began = time.monotonic()
    with pytest.raises(HookWriteError, match="freed nothing within 0 s|freed nothing within 1 s"):
        wl.train(hook, 50)
    assert time.monotonic() - began < 30
    gate.set()
    hook.close()


def test_budget_waits_only_for_what_the_writer_will_free() -> None:
    budget = ByteBudget(100, deadline_s=5)
    budget.acquire(80)  # nothing queued: no wait even if a step alone is large
    budget.acquire(50)
    assert budget.stats().over_limit == 1 and budget.stats().waits == 0
    budget.queue(130)
    freed = threading.Timer(0.2, lambda: budget.release(130, queued=True))
    freed.start()
    budget.acquire(60)  # waits for the writer
    st = budget.stats()
    assert st.waits == 1 and st.waited_s >= 0.15 and budget.held == 60


@pytest.mark.parametrize(("text", "expected"), [("1048576", 1 << 20), ("512M", 512 << 20), ("2G", 2 << 30),
                                                ("64MiB", 64 << 20), (" 3k ", 3 << 10)])
def test_queue_limit_from_the_environment(text: str, expected: int) -> None:
    assert SaveOptions.from_env({QUEUE_BYTES_ENV: text}).queue_bytes == expected
    assert parse_bytes(text, "x") == expected


@pytest.mark.parametrize("text", ["", "0", "-5", "lots", "1.5G"])
def test_a_bad_queue_limit_names_the_variable(text: str) -> None:
    if not text:
        assert SaveOptions.from_env({QUEUE_BYTES_ENV: text}).queue_bytes == 1 << 30  # unset: the default
        return
    with pytest.raises(HookConfigError, match=QUEUE_BYTES_ENV):
        SaveOptions.from_env({QUEUE_BYTES_ENV: text})


def test_saved_twice_in_a_step_frees_the_first_copy(tmp_path: Path) -> None:
    hook = Hook(wl.config(tmp_path / "t", 1))
    model = wl.make_model()
    hook.register_module(model)
    model(torch.randn(2, 12))
    held = hook._saver.budget.held
    hook.save_tensor("mine", torch.ones(1000), "custom")
    hook.save_tensor("mine", torch.full((1000,), 2.0), "custom")
    assert hook._saver.budget.held == held + 4000
    hook.close()
    assert hook._saver.budget.held == 0
    np.testing.assert_array_equal(create_trial(tmp_path / "t").tensor("mine").value(0), np.full(1000, 2.0, np.float32))
