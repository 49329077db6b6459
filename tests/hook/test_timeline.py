"""The framework timeline in-process (hook._timeline, hook._dataloader): ranges, events of real
trainings read back with trial.profiler.ProfilerReader, rotation, write failures, zero cost when off."""
from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data import dataloader as dl

from sdlocal.hook import _timeline
from sdlocal.hook._autoattach import AutoAttach
from sdlocal.hook.config import HookConfig
from sdlocal.hook.profiler_config import DataloaderProfiling, ProfileRange, ProfilerConfig
from sdlocal.hook.pytorch import Hook
from sdlocal.trial.modes import ModeKeys
from sdlocal.trial.profiler import ProfilerReader
from sdlocal.trial.profiler.names import parse_trace_key

# A Hook that saves no tensor: the timeline driven by the tensor hook's step logic.
TIMELINE_ONLY = HookConfig(collections=(), saved_collection_names=frozenset())
ORIGINALS = (dl.DataLoader._get_iterator, dl._BaseDataLoaderIter.__next__,
             dl._MultiProcessingDataLoaderIter._shutdown_workers)


def _torch_untouched() -> bool:
    from torch.optim import optimizer

    return (ORIGINALS == (dl.DataLoader._get_iterator, dl._BaseDataLoaderIter.__next__,
                          dl._MultiProcessingDataLoaderIter._shutdown_workers)
            and not optimizer._global_optimizer_pre_hooks and not optimizer._global_optimizer_post_hooks)


@pytest.fixture(autouse=True)
def _fresh_timeline() -> Iterator[None]:
    _timeline.shutdown()
    yield
    _timeline.shutdown()
    assert _torch_untouched()


class FakeClock:
    def __init__(self, now_us: int) -> None:
        self.now_us = now_us

    def __call__(self) -> int:
        return self.now_us


def _config(tmp_path: Path, **kw: object) -> ProfilerConfig:
    return ProfilerConfig(enabled=True, local_path=str(tmp_path / "profiler"), **kw)  # type: ignore[arg-type]


def _read(tmp_path: Path) -> ProfilerReader:
    root = tmp_path / "profiler"
    assert not list(root.rglob("*.tmp")), "a trace file was left open"
    reader = ProfilerReader(root)
    reader.refresh()
    assert reader.damage == []
    return reader


def _model() -> tuple[nn.Module, torch.optim.Optimizer, nn.Module]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    return model, torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss()


def _train_step(model: nn.Module, opt: torch.optim.Optimizer, loss_fn: nn.Module,
                x: torch.Tensor | None = None, y: torch.Tensor | None = None) -> None:
    model.train()
    x = torch.randn(5, 4) if x is None else x
    y = torch.randint(0, 3, (5,)) if y is None else y
    loss = loss_fn(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()


def _eval_step(model: nn.Module) -> None:
    model.eval()
    with torch.no_grad():
        model(torch.randn(5, 4))


# ---------------------------------------------------------------------------------------- ranges
def test_step_ranges() -> None:
    r = _timeline.RangeTracker(ProfileRange(start_step=5, num_steps=2))
    assert [r.active(s) for s in range(9)] == [False] * 5 + [True, True] + [False] * 2
    assert r.finished(7) and not r.finished(6)
    # No start step: from the first step checked; no num_steps: one step.
    r = _timeline.RangeTracker(ProfileRange(num_steps=2))
    assert [r.active(s) for s in (3, 4, 5, 6)] == [True, True, False, False]
    r = _timeline.RangeTracker(ProfileRange(start_step=0))
    assert [r.active(s) for s in (0, 1)] == [True, False]


def test_time_ranges() -> None:
    r = _timeline.RangeTracker(ProfileRange(start_time_s=100.0, duration_s=5.0))
    assert [r.active(1, t) for t in (99.9, 100.0, 104.9, 105.0)] == [False, True, True, False]
    # No start time: from the first check.
    r = _timeline.RangeTracker(ProfileRange(duration_s=5.0))
    assert [r.active(1, t) for t in (50.0, 54.9, 55.0)] == [True, True, False]
    # No duration: the one step checked first at or after the start time (smdebug).
    r = _timeline.RangeTracker(ProfileRange(start_time_s=100.0))
    assert [r.active(3, 99.0), r.active(4, 100.0), r.active(4, 101.0), r.active(5, 102.0)] == [False, True, True, False]


# ---------------------------------------------------------------------------------------- events
def test_events_of_a_step_with_a_fake_clock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock(1_700_000_000_000_000)
    t0 = clock.now_us
    tl = _timeline.Timeline(_config(tmp_path), clock_ns=lambda: clock.now_us * 1000, node="7-algo-1",
                            drain_interval_s=3600)
    marks = [(t0 + 1000, "start", ModeKeys.TRAIN), (t0 + 1300, "fwd", None), (t0 + 1800, "opt_pre", None),
             (t0 + 1900, "opt_post", None), (t0 + 2000, "start", ModeKeys.EVAL), (t0 + 2100, "fwd", None),
             (t0 + 3000, "start", ModeKeys.TRAIN), (t0 + 3100, "fwd", None)]
    for at, what, mode in marks:
        clock.now_us = at
        if what == "start":
            assert mode is not None
            tl.step_start(mode, "Net")
        elif what == "fwd":
            tl.forward_end(None, None, None)
        elif what == "opt_pre":
            tl._optimizer_pre(None, None, None)
        else:
            tl._optimizer_post(None, None, None)
    clock.now_us = t0 + 5000
    files = tl.close()
    tl.detach()
    assert [parse_trace_key(f.relative_to(tmp_path / "profiler").as_posix()) for f in files] == [
        parse_trace_key(f"framework/pevents/2023111422/{t0 + 3100}_7-algo-1_pythontimeline.json")]
    reader = _read(tmp_path)
    fw = reader.framework
    train = fw.steps(mode="TRAIN")
    assert (train.step.tolist(), train.start_us.tolist(), train.end_us.tolist()) == (
        [0, 1], [t0 + 1000, t0 + 3000], [t0 + 1900, t0 + 3100])
    ev = fw.steps(mode="EVAL")
    assert (ev.step.tolist(), ev.start_us.tolist(), ev.end_us.tolist()) == ([0], [t0 + 2000], [t0 + 2100])
    assert [(e.name, e.start_us - t0, e.end_us - t0, e.args) for e in fw.events(phase="Forward")] == [
        ("Net", 1000, 1300, {"step_num": 0}), ("Net", 2000, 2100, {"step_num": 0}), ("Net", 3000, 3100, {"step_num": 1})]
    # The backward event: from the forward's end to the optimizer's step (only where there is one).
    assert [(e.start_us - t0, e.end_us - t0, e.args) for e in fw.events(phase="Backward(post-forward)")] == [
        (1300, 1800, {"step_num": 0})]
    assert all(e.node == "7-algo-1" for e in fw.events())


def test_a_hooked_training_records_every_step(tmp_path: Path) -> None:
    _timeline.configure(_config(tmp_path))
    model, opt, loss_fn = _model()
    hook = Hook(TIMELINE_ONLY, dry_run=True, out_dir=tmp_path / "tensors")
    hook.register_module(model)
    for _ in range(6):
        _train_step(model, opt, loss_fn)
    for _ in range(2):
        _eval_step(model)
    _train_step(model, opt, loss_fn)
    hook.close()
    assert not (tmp_path / "tensors").exists()  # a timeline-only hook writes no trial
    fw = _read(tmp_path).framework
    train, ev = fw.steps(mode="TRAIN"), fw.steps(mode="EVAL")
    assert train.step.tolist() == list(range(7)) and ev.step.tolist() == [0, 1]
    steps = sorted([(int(s), int(e), "TRAIN", int(n))
                    for s, e, n in zip(train.start_us, train.end_us, train.step, strict=True)]
                   + [(int(s), int(e), "EVAL", int(n)) for s, e, n in zip(ev.start_us, ev.end_us, ev.step, strict=True)])
    assert [(m, n) for _, _, m, n in steps] == [("TRAIN", i) for i in range(6)] + [("EVAL", 0), ("EVAL", 1), ("TRAIN", 6)]
    for (s0, e0, _, _), (s1, _, _, _) in zip(steps, steps[1:], strict=False):
        assert s0 <= e0 <= s1  # steps do not overlap
    # One forward per step, starting with it and within it; a backward for each training step,
    # from the forward's end to the optimizer's step, within the step.
    forwards = fw.events(phase="Forward")
    assert [(f.name, f.start_us, (f.args or {})["step_num"]) for f in forwards] == [
        ("Sequential", s, n) for s, _, _, n in steps]
    by_start = {s: (e, m) for s, e, m, _ in steps}
    for f in forwards:
        assert f.start_us < f.end_us <= by_start[f.start_us][0]
    bwd = fw.events(phase="Backward(post-forward)")
    assert len(bwd) == 7
    for b in bwd:
        f = next(f for f in forwards if f.end_us == b.start_us)
        end, mode = by_start[f.start_us]
        assert mode == "TRAIN" and b.args == f.args and b.start_us <= b.end_us <= end


def test_explicit_modes_and_global_steps(tmp_path: Path) -> None:
    _timeline.configure(_config(tmp_path))
    model, opt, loss_fn = _model()
    hook = Hook(HookConfig.from_dict({}), out_dir=tmp_path / "tensors")
    hook.register_module(model)
    hook.set_mode(ModeKeys.PREDICT)
    _eval_step(model)
    hook.set_mode(ModeKeys.GLOBAL)
    _train_step(model, opt, loss_fn)
    _train_step(model, opt, loss_fn)
    hook.close()
    fw = _read(tmp_path).framework
    assert fw.steps(mode="PREDICT").step.tolist() == [0]
    assert fw.steps(mode="GLOBAL").step.tolist() == [1, 2]  # GLOBAL steps count every step


def test_hand_over_continues_the_steps(tmp_path: Path) -> None:
    """The zero-code hook (profiling only) hands over to a hook the script makes after 3 steps,
    writing elsewhere: the timeline goes on from step 3, one file set, no step twice."""
    _timeline.configure(_config(tmp_path))
    attach = AutoAttach(None)
    attach.install()
    try:
        model, opt, loss_fn = _model()
        for _ in range(3):
            _train_step(model, opt, loss_fn)
        assert attach.hook is not None and attach.hook.step == 2
        own = Hook(HookConfig.from_dict({}), out_dir=tmp_path / "own")
        own.register_module(model)
        assert attach.hook.handed_over
        for _ in range(3):
            _train_step(model, opt, loss_fn)
        own.close()
    finally:
        attach.close()
    fw = _read(tmp_path).framework
    assert fw.steps(mode="TRAIN").step.tolist() == list(range(6))
    assert len(fw.events(phase="Backward(post-forward)")) == 6


def test_rotation_closes_every_file_with_its_final_name(tmp_path: Path) -> None:
    _timeline.configure(_config(tmp_path, max_file_size=1500))
    tl = _timeline.current()
    assert tl is not None
    model, opt, loss_fn = _model()
    hook = Hook(TIMELINE_ONLY, dry_run=True, out_dir=tmp_path / "tensors")
    hook.register_module(model)
    for i in range(40):
        _train_step(model, opt, loss_fn)
        if i % 10 == 9:
            tl.drain()  # as the writer thread does, several times during training
    hook.close()
    files = sorted((tmp_path / "profiler").rglob("*_pythontimeline.json"))
    assert len(files) >= 3
    fw = _read(tmp_path).framework
    assert fw.steps(mode="TRAIN").step.tolist() == list(range(40))
    assert tl.events_written == 40 * 3 and tl.events_dropped == 0


def test_write_failures_make_the_timeline_give_up_not_training(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "profiler"
    blocker.write_text("a file where the folder should be")
    _timeline.configure(ProfilerConfig(enabled=True, local_path=str(blocker), file_open_fail_threshold=3))
    tl = _timeline.current()
    assert tl is not None
    model, opt, loss_fn = _model()
    hook = Hook(TIMELINE_ONLY, dry_run=True, out_dir=tmp_path / "tensors")
    hook.register_module(model)
    with caplog.at_level(logging.WARNING, logger="sdlocal.hook._timeline"):
        for _ in range(5):
            _train_step(model, opt, loss_fn)
            tl.drain()
        hook.close()  # does not raise
    assert tl.events_written == 0 and tl.events_dropped > 0
    assert [r.getMessage() for r in caplog.records if "no more framework events" in r.getMessage()]
    assert blocker.read_text() == "a file where the folder should be"


def test_disabled_profiler_costs_nothing(tmp_path: Path) -> None:
    assert _timeline.configure(ProfilerConfig.disabled()) is None
    model, opt, loss_fn = _model()
    hook = Hook(TIMELINE_ONLY, dry_run=True, out_dir=tmp_path / "tensors")
    hook.register_module(model)
    assert hook._timeline is None and not model._forward_hooks  # only the step pre-hook
    for _ in range(3):
        _train_step(model, opt, loss_fn)
    hook.close()
    assert _torch_untouched()  # no DataLoader probe, no optimizer hook
    assert list(tmp_path.iterdir()) == []


def test_enabled_profiler_hooks_what_it_needs(tmp_path: Path) -> None:
    from torch.optim import optimizer

    _timeline.configure(_config(tmp_path))
    model, opt, loss_fn = _model()
    hook = Hook(TIMELINE_ONLY, dry_run=True, out_dir=tmp_path / "tensors")
    hook.register_module(model)
    assert len(model._forward_hooks) == 1
    assert _torch_untouched()  # no DataLoader probe without DataloaderProfilingConfig; optimizers: at the first step
    _train_step(model, opt, loss_fn)
    assert len(optimizer._global_optimizer_pre_hooks) == len(optimizer._global_optimizer_post_hooks) == 1
    hook.close()


def test_node_id(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.setenv("SM_CURRENT_HOST", "algo-2")
    assert _timeline.node_id() == f"{os.getpid()}-algo-2"
    monkeypatch.setenv("SM_CURRENT_HOST", "my_host")
    assert _timeline.node_id() == f"{os.getpid()}-my-host"  # "_" would break smdebug's file-name split


# ---------------------------------------------------------------------------------------- data loading
def _loader_training(tmp_path: Path, dataloader: DataloaderProfiling, batches: int = 6) -> list[tuple[int, int]]:
    """Trains one epoch of `batches` batches through a DataLoader; returns the steps' (start, end)."""
    _timeline.configure(_config(tmp_path, dataloader=dataloader))
    model, opt, loss_fn = _model()
    hook = Hook(TIMELINE_ONLY, dry_run=True, out_dir=tmp_path / "tensors")
    hook.register_module(model)
    data = TensorDataset(torch.randn(batches * 4, 4), torch.randint(0, 3, (batches * 4,)))
    for x, y in DataLoader(data, batch_size=4):
        _train_step(model, opt, loss_fn, x, y)
    hook.close()
    steps = _read(tmp_path).framework.steps(mode="TRAIN")
    assert steps.step.tolist() == list(range(batches))
    return list(zip(steps.start_us.tolist(), steps.end_us.tolist(), strict=True))


def test_dataloader_events_in_the_step_range(tmp_path: Path) -> None:
    steps = _loader_training(tmp_path, DataloaderProfiling(ProfileRange(start_step=2, num_steps=2)))
    fw = _read(tmp_path).framework
    nexts = fw.events(phase="DataLoaderIter")
    assert [e.name for e in nexts] == ["_SingleProcessDataLoaderIter::GetNext"] * 2
    assert all(e.args == {"num_workers": 0, "pin_memory": False} for e in nexts)
    # The batches of steps 2 and 3: fetched after the previous step, before the step itself.
    for e, step in zip(nexts, (2, 3), strict=True):
        assert steps[step - 1][1] <= e.start_us <= e.end_us <= steps[step][0]
    assert fw.events(phase="DataLoaderIterInitialize") == []  # iter() ran before step 0: out of range
    assert fw.events(phase="DataLoaderWorker") == []


def test_dataloader_iterator_creation_and_metrics_regex(tmp_path: Path) -> None:
    steps = _loader_training(tmp_path, DataloaderProfiling(ProfileRange(start_step=0, num_steps=10),
                                                           metrics_regex="dataloaderiterinit"))
    fw = _read(tmp_path).framework
    assert fw.events(phase="DataLoaderIter") == []  # GetNext does not match the regex
    (init,) = fw.events(phase="DataLoaderIterInitialize")
    assert init.name == "_SingleProcessDataLoaderIter.__init__" and init.args == {"num_workers": 0, "pin_memory": False}
    assert init.end_us <= steps[0][0]


def test_dataloader_time_range(tmp_path: Path) -> None:
    # A start in the past and a 1-hour duration: every batch of this epoch.
    import time

    _loader_training(tmp_path, DataloaderProfiling(ProfileRange(start_time_s=time.time() - 1, duration_s=3600)))
    fw = _read(tmp_path).framework
    assert len(fw.events(phase="DataLoaderIter")) == 6
    assert len(fw.events(phase="DataLoaderIterInitialize")) == 1


def test_dataloader_probe_is_removed_with_the_timeline(tmp_path: Path) -> None:
    _timeline.configure(_config(tmp_path, dataloader=DataloaderProfiling(ProfileRange(0, 1))))
    assert dl._BaseDataLoaderIter.__next__ is not ORIGINALS[1]
    _timeline.shutdown()
    assert _torch_untouched()


def test_backward_is_recorded_when_data_loading_starts_first(tmp_path: Path) -> None:
    # The DataLoader probe records before the model's first step: the optimizer hooks still come.
    _loader_training(tmp_path, DataloaderProfiling(ProfileRange(start_step=0, num_steps=1)))
    fw = _read(tmp_path).framework
    assert len(fw.events(phase="DataLoaderIterInitialize")) == 1
    assert len(fw.events(phase="Backward(post-forward)")) == 6


# ---------------------------------------------------------------------------------------- detailed profiling
def test_detailed_profiling_in_its_step_range(tmp_path: Path) -> None:
    _timeline.configure(_config(tmp_path, detailed=ProfileRange(start_step=2, num_steps=2)))
    model, opt, loss_fn = _model()
    hook = Hook(TIMELINE_ONLY, dry_run=True, out_dir=tmp_path / "tensors")
    hook.register_module(model)
    for _ in range(6):
        _train_step(model, opt, loss_fn)
    hook.close()
    fw = _read(tmp_path).framework
    steps = fw.steps(mode="TRAIN")
    ops = fw.events(phase="cpu_functions")
    names = {e.name for e in ops}
    assert {"aten::addmm", "aten::relu"} <= names  # the forward's operators
    assert any("backward" in n.lower() for n in names)  # and the backward's
    # Only steps 2 and 3, from step 2's start to step 4's start; each operator in its step.
    assert {(e.args or {})["step_num"] for e in ops} == {2, 3}
    assert all(steps.start_us[2] <= e.start_us < steps.start_us[4] for e in ops)
    for e in ops:
        n = (e.args or {})["step_num"]
        assert steps.start_us[n] <= e.start_us and (e.args or {})["device"] == "cpu"
        if n == 2:
            assert e.start_us < steps.start_us[3]


def test_detailed_profiling_stops_when_the_timeline_closes(tmp_path: Path) -> None:
    _timeline.configure(_config(tmp_path, detailed=ProfileRange(start_step=1, num_steps=100)))
    model, opt, loss_fn = _model()
    hook = Hook(TIMELINE_ONLY, dry_run=True, out_dir=tmp_path / "tensors")
    hook.register_module(model)
    for _ in range(3):
        _train_step(model, opt, loss_fn)
    hook.close()
    fw = _read(tmp_path).framework
    assert {(e.args or {})["step_num"] for e in fw.events(phase="cpu_functions")} == {1, 2}
    assert not torch.autograd._profiler_enabled()  # torch's profiler was stopped
