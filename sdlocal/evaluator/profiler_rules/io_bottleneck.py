"""IOBottleneck: the GPUs wait while the CPUs wait for I/O."""
from __future__ import annotations

from typing import Any

from sdlocal.evaluator.profiler_rule import DEFAULT_SCAN_INTERVAL_US
from sdlocal.evaluator.profiler_rules._bottleneck import Bottleneck
from sdlocal.trial.profiler.names import IO_WAIT


class IOBottleneck(Bottleneck):
    """Fires when more than `threshold` % of the sampling instants are I/O bottlenecks: some GPU
    below `gpu_threshold` % utilization while the I/O wait is above `io_threshold` %.

    Choices: the I/O wait of an instant is its highest per-core `I/OWaitPercentage` (the core
    the loader blocks on); otherwise as CPUBottleneck: least used GPU, judged at every instant once
    more than `patience` instants are in, nothing to judge without GPU metrics. Under the docker
    runtime the I/O wait is the host's for the container's cores (not accounted per cgroup).
    Details, per node: datapoints, bottlenecks, low_gpu_utilization, bottleneck_percent.
    """

    group = "profiler"
    busy_dimension = IO_WAIT
    busy_name = "io_threshold"

    def __init__(self, base_trial: Any, threshold: object = 50, gpu_threshold: object = 10,
                 io_threshold: object = 50, patience: object = 1000,
                 scan_interval_us: object = DEFAULT_SCAN_INTERVAL_US) -> None:
        super().__init__(base_trial, threshold, gpu_threshold, io_threshold, patience, scan_interval_us)
