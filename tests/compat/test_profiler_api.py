"""smdebug's profiler-facing Hook API: `record_trace_events` lands on the framework timeline."""
from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import smdebug.pytorch as smd
import torch
from torch import nn

from sdlocal.hook import _timeline
from sdlocal.hook.profiler_config import ProfilerConfig
from sdlocal.trial.profiler import ProfilerReader


@pytest.fixture(autouse=True)
def _fresh_timeline() -> Iterator[None]:
    _timeline.shutdown()
    yield
    _timeline.shutdown()


def test_record_trace_events(tmp_path: Path) -> None:
    _timeline.configure(ProfilerConfig(enabled=True, local_path=str(tmp_path / "profiler")))
    hook = smd.Hook(out_dir=str(tmp_path / "tensors"))
    model = nn.Linear(2, 2)
    hook.register_module(model)
    model(torch.randn(3, 2))
    t = time.time()
    hook.record_trace_events(timestamp=t, training_phase="MyPhase", op_name="load", duration=0.25, step_num=7)
    hook.record_trace_events(timestamp=t, training_phase="MyPhase", op_name="marker", phase="i")  # not recorded
    hook.record_trace_events(timestamp=t + 1, training_phase="Other", op_name="odd", duration=0.001,
                             value=torch.tensor(2.5), nan=float("nan"))
    hook.close()
    reader = ProfilerReader(tmp_path / "profiler")
    reader.refresh()
    (ev,) = reader.framework.events(phase="MyPhase")
    assert (ev.name, ev.start_us, ev.end_us - ev.start_us, ev.args) == ("load", int(t * 1e6), 250_000, {"step_num": 7})
    (odd,) = reader.framework.events(phase="Other")  # args that are not JSON values: their str
    assert odd.args == {"value": "tensor(2.5000)", "nan": "nan"}
    assert len(reader.framework.steps()) == 1


def test_record_trace_events_without_profiling(tmp_path: Path) -> None:
    _timeline.configure(None)
    hook = smd.Hook(out_dir=str(tmp_path / "tensors"))
    hook.record_trace_events(timestamp=time.time(), training_phase="MyPhase", op_name="x")
    hook.close()
    assert not (tmp_path / "profiler").exists()
