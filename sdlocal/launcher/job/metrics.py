"""The training's metrics, as SageMaker reads them from its log: each `MetricDefinitions` regex
(the request's, or the built-in algorithm's: launcher/spec/algorithm.py) searched in each log line,
its first group the value. SageMaker publishes each value to CloudWatch (namespace
`/aws/sagemaker/TrainingJobs`, dimension `TrainingJobName`: what the SDK's
`training_job_analytics` reads) and DescribeTrainingJob's `FinalMetricDataList` holds each metric's
last value.
"""
from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sdlocal.launcher.spec.algorithm import MetricDefinition

NAMESPACE = "/aws/sagemaker/TrainingJobs"
MAX_DATA_PER_CALL = 1000  # PutMetricData's MetricData entries


@dataclass(frozen=True)
class MetricValue:
    name: str
    value: float
    timestamp: float  # seconds since the epoch: when the line was read


class MetricScanner:
    def __init__(self, definitions: Sequence[MetricDefinition]) -> None:
        self.definitions = tuple(definitions)
        self._patterns = [(d.name, re.compile(d.regex)) for d in self.definitions]

    def scan(self, line: str, timestamp: float) -> list[MetricValue]:
        """The metrics one line holds (a value that is no finite number is no metric)."""
        out = []
        for name, pattern in self._patterns:
            m = pattern.search(line)
            if m is None:
                continue
            try:
                value = float(m.group(1))
            except (TypeError, ValueError, IndexError):
                continue
            if math.isfinite(value):
                out.append(MetricValue(name, value, timestamp))
        return out


def final_metrics(definitions: Sequence[MetricDefinition], values: Iterable[MetricValue]) -> list[dict[str, Any]]:
    """FinalMetricDataList: the last value of each metric seen, in the definitions' order."""
    last = {v.name: v for v in values}
    return [{"MetricName": d.name, "Value": last[d.name].value, "Timestamp": last[d.name].timestamp}
            for d in definitions if d.name in last]


class MetricRecorder:
    """The metrics of one job's log lines as they are read (`lines`: LogPump's `on_lines`), kept for
    FinalMetricDataList and put to CloudWatch (`cloudwatch`: a client, or None). A failed put is
    said once (`on_error`), never raised: the log goes on."""

    def __init__(self, job_name: str, definitions: Sequence[MetricDefinition], cloudwatch: Any,
                 on_error: Callable[[str], None] = lambda message: None) -> None:
        self.job_name = job_name
        self.scanner = MetricScanner(definitions)
        self.cloudwatch = cloudwatch
        self.on_error = on_error
        self.values: list[MetricValue] = []
        self._failed = False
        self._lock = threading.Lock()

    def lines(self, lines: Sequence[str], timestamp: float) -> None:
        found = [v for line in lines for v in self.scanner.scan(line, timestamp)]
        if not found:
            return
        with self._lock:
            self.values += found
        if self.cloudwatch is not None:
            self._put(found)

    def _put(self, values: list[MetricValue]) -> None:
        dimensions = [{"Name": "TrainingJobName", "Value": self.job_name}]
        data = [{"MetricName": v.name, "Dimensions": dimensions, "Timestamp": v.timestamp, "Value": v.value}
                for v in values]
        try:
            for start in range(0, len(data), MAX_DATA_PER_CALL):
                self.cloudwatch.put_metric_data(Namespace=NAMESPACE, MetricData=data[start:start + MAX_DATA_PER_CALL])
        except Exception as e:  # noqa: BLE001 - the metrics are kept for FinalMetricDataList all the same
            if not self._failed:
                self._failed = True
                self.on_error(f"putting the training's metrics to CloudWatch failed: {type(e).__name__}: {e}")

    def final(self) -> list[dict[str, Any]]:
        with self._lock:
            return final_metrics(self.scanner.definitions, self.values)
