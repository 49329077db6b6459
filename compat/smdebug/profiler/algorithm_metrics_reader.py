"""smdebug.profiler.algorithm_metrics_reader: a job's framework trace events
(evaluator/analysis/readers.py)."""
from __future__ import annotations

from sdlocal.evaluator.analysis.readers import (
    AlgorithmMetricsReader,
    LocalAlgorithmMetricsReader,
    S3AlgorithmMetricsReader,
)

__all__ = ["AlgorithmMetricsReader", "LocalAlgorithmMetricsReader", "S3AlgorithmMetricsReader"]
