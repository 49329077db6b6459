"""smdebug.profiler.system_metrics_reader: a job's system metrics (evaluator/analysis/readers.py)."""
from __future__ import annotations

from sdlocal.evaluator.analysis.readers import (
    LocalSystemMetricsReader,
    S3SystemMetricsReader,
    SystemMetricsReader,
)

__all__ = ["LocalSystemMetricsReader", "S3SystemMetricsReader", "SystemMetricsReader"]
