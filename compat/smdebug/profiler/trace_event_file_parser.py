"""smdebug.profiler.trace_event_file_parser: the framework event classes (what get_events returns)."""
from __future__ import annotations

from sdlocal.evaluator.analysis.events import FrameworkEvent as TraceEvent
from sdlocal.evaluator.analysis.events import ProcessInfo, ThreadInfo

__all__ = ["ProcessInfo", "ThreadInfo", "TraceEvent"]
