"""smdebug's ProfilerTrial: what `create_trial(path, profiler=True)` returns.

    trial = create_trial("s3://bucket/out/job/profiler-output", profiler=True)
    trial.get_system_metrics(start_us, end_us)       # [SystemEvent]
    trial.get_framework_metrics(start_us, end_us)    # [FrameworkEvent]
    trial.wait_for_data(end_us, start_us); trial.job_finished(); trial.get_latest_timestamp()

Differences from smdebug: the waits have deadlines (`timeout=`, ProfilerDataTimeout); no folder is
made unless `output_dir` is given (smdebug made /opt/ml/processing/outputs/ wherever it ran).
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sdlocal.evaluator.analysis.events import FrameworkEvent, SystemEvent
from sdlocal.evaluator.analysis.readers import readers_for
from sdlocal.evaluator.errors import ProfilerDataTimeout
from sdlocal.trial.errors import NoMoreProfilerData

WAIT_TIMEOUT_S = 1800.0
POLL_INTERVAL_S = 10.0


class ProfilerTrial:
    def __init__(self, name: str, trial_dir: str, output_dir: str | None = None, *, timeout: float = WAIT_TIMEOUT_S,
                 interval: float = POLL_INTERVAL_S, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic, **reader_kwargs: Any) -> None:
        self.name = name
        self.path = str(trial_dir)
        self.output_dir = output_dir
        self.temp_dir = os.path.join(output_dir, ".sagemaker-ignore") if output_dir else None
        if output_dir:
            Path(self.temp_dir or output_dir).mkdir(parents=True, exist_ok=True)
        self.timeout, self.interval, self._sleep, self._clock = timeout, interval, sleep, clock
        self.system_metrics_reader, self.framework_metrics_reader = readers_for(self.path, **reader_kwargs)
        self._reader = self.system_metrics_reader.profiler_reader
        self.first_timestamp = 0
        self.get_first_timestamp()

    def __repr__(self) -> str:
        return f"<ProfilerTrial {self.name} at {self.path}>"

    def job_finished(self) -> bool:
        return self._reader.training_ended()

    def _stamps(self, pick: int) -> list[int]:
        out = []
        for reader in (self.system_metrics_reader, self.framework_metrics_reader):
            span = reader.get_current_time_range_for_event_query()
            if span[pick]:
                out.append(span[pick])
        return out

    def get_first_timestamp(self) -> int:
        """The first file timestamp of either stream (µs), waiting for one up to the deadline."""
        deadline = self._clock() + self.timeout
        while True:
            self._reader.refresh()
            firsts = self._stamps(0)
            if firsts:
                self.first_timestamp = min(firsts)
                return self.first_timestamp
            if self.job_finished():
                raise NoMoreProfilerData(0)
            if self._clock() >= deadline:
                raise ProfilerDataTimeout(f"no profiler data under {self.path} within {self.timeout:g} s")
            self._sleep(self.interval)

    def get_latest_timestamp(self) -> int:
        self._reader.refresh()
        latest = self._stamps(1)
        return min(latest) if latest else 0

    def wait_for_data(self, end_time: int, start_time: int) -> None:
        """Return once data reaches `end_time` (µs); NoMoreProfilerData when training ended before
        `start_time`; ProfilerDataTimeout at the deadline."""
        deadline = self._clock() + self.timeout
        while end_time > self.get_latest_timestamp() and not self.job_finished():
            if self._clock() >= deadline:
                raise ProfilerDataTimeout(f"profiler data under {self.path} did not reach {end_time} µs within "
                                          f"{self.timeout:g} s")
            self._sleep(self.interval)
        if self.job_finished() and start_time >= self.get_latest_timestamp():
            raise NoMoreProfilerData(end_time)

    def get_system_metrics(self, start_time: int, end_time: int) -> list[SystemEvent]:
        return self.system_metrics_reader.get_events(start_time, end_time)

    def get_framework_metrics(self, start_time: int, end_time: int) -> list[FrameworkEvent]:
        return self.framework_metrics_reader.get_events(start_time, end_time)
