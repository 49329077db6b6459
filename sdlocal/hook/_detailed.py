"""Detailed profiling (DetailedProfilingConfig): torch's own profiler over the configured steps or
time, its operator events written to the framework timeline as smdebug's PyTorch hook wrote them:
phase `cpu_functions` (CUDA activity: `gpu_functions-dev:<device>`), name the operator
(`aten::addmm`, ...), args `step_num` (the global step the operator ran in), `tid`, `device`.

The profiler starts at the first step in the range and stops at the first step after it (or when
the timeline closes), so the events cover whole steps and what runs between them. Outside the
range the cost is a range check per step; inside, torch's profiler's own (SageMaker's docs warn
against profiling more than a few steps).
"""
from __future__ import annotations

import bisect
import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sdlocal.hook._timeline import RangeTracker, Timeline

logger = logging.getLogger(__name__)

CPU_PHASE = "cpu_functions"
GPU_PHASE_PREFIX = "gpu_functions-dev:"


class DetailedProfiler:
    def __init__(self, timeline: Timeline, tracker: RangeTracker) -> None:
        self.timeline = timeline
        self.tracker = tracker
        self._profile: Any = None
        self._step_starts: list[tuple[int, int]] = []  # (start µs, global step) of profiled steps
        self.done = False

    def on_step(self, step: int, now_us: int) -> None:
        """At each step start: start or stop torch's profiler as the range says."""
        active = self.tracker.active(step, now_us / 1e6)
        if self._profile is not None and not active:
            self.stop()
        if active:
            if self._profile is None:
                self._start()
            self._step_starts.append((now_us, step))
        elif self.tracker.finished(step):
            self.done = True  # a step range that is over: no more checks

    def _start(self) -> None:
        import torch
        from torch.autograd import profiler

        # With a GPU, its kernels too (gpu_functions-dev:<n> events).
        prof = profiler.profile(use_device="cuda" if torch.cuda.is_available() else None)
        try:
            prof.__enter__()
        except RuntimeError as e:  # the script runs torch's profiler itself
            logger.warning("sdlocal profiler: detailed profiling skipped: torch's profiler is busy (%s)", e)
            self.done = True
            return
        self._profile = prof

    def stop(self) -> None:
        """Stop torch's profiler and hand its events to the timeline."""
        prof, self._profile = self._profile, None
        if prof is None:
            return
        starts, self._step_starts = self._step_starts, []
        try:
            prof.__exit__(None, None, None)
            events = prof.function_events
            base_us = prof.kineto_results.trace_start_ns() // 1000
        except Exception as e:  # noqa: BLE001 - a profiler failure must not stop training
            logger.warning("sdlocal profiler: detailed profiling failed: %r", e)
            return
        keys = [s for s, _ in starts]
        for ev in events:
            start = base_us + int(ev.time_range.start)
            end = base_us + int(ev.time_range.end)
            i = bisect.bisect_right(keys, start) - 1
            step = starts[i][1] if i >= 0 else (starts[0][1] if starts else self.timeline.step)
            device = str(getattr(ev, "device_type", "cpu")).rsplit(".", 1)[-1].lower()
            if device == "cpu":
                phase, args = CPU_PHASE, {"step_num": step, "tid": int(ev.thread), "device": "cpu"}
            else:
                index = int(getattr(ev, "device_index", 0))
                phase, args = f"{GPU_PHASE_PREFIX}{index}", {"step_num": step, "tid": index, "device": index}
            self.timeline.record(phase, ev.name, start, end, args)
