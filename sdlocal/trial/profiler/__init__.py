"""Profiler output (trial-format.md §9): writers of SageMaker's system-metric files and smdebug's
framework trace files, and a reader of a job's `profiler-output/` (local or S3) for profiler rules.
Times are epoch microseconds; windows are `[start_us, end_us)`."""
from __future__ import annotations

from sdlocal.trial.profiler import names
from sdlocal.trial.profiler.data import (
    EventArrays,
    FrameworkEvents,
    Series,
    SeriesKey,
    StepArrays,
    SystemMetrics,
    step_mode,
)
from sdlocal.trial.profiler.errors import Damage, ProfilerDataError
from sdlocal.trial.profiler.parse import SystemRecord, TraceEvent, parse_system_file, parse_trace_file
from sdlocal.trial.profiler.reader import ProfilerReader, RefreshResult
from sdlocal.trial.profiler.system_writer import Sample, SystemMetricsWriter
from sdlocal.trial.profiler.trace_writer import TraceWriter, now_us

__all__ = [
    "Damage",
    "EventArrays",
    "FrameworkEvents",
    "ProfilerDataError",
    "ProfilerReader",
    "RefreshResult",
    "Sample",
    "Series",
    "SeriesKey",
    "StepArrays",
    "SystemMetrics",
    "SystemMetricsWriter",
    "SystemRecord",
    "TraceEvent",
    "TraceWriter",
    "names",
    "now_us",
    "parse_system_file",
    "parse_trace_file",
    "step_mode",
]
