"""smdebug.profiler.system_profiler_file_parser: the system event class (what get_events returns)."""
from __future__ import annotations

from sdlocal.evaluator.analysis.events import SystemEvent as ProfilerSystemEvent

__all__ = ["ProfilerSystemEvent"]
