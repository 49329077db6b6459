"""CPUBottleneck: the GPUs wait while the CPU is busy."""
from __future__ import annotations

from typing import Any

from sdlocal.evaluator.profiler_rule import DEFAULT_SCAN_INTERVAL_US
from sdlocal.evaluator.profiler_rules._bottleneck import Bottleneck
from sdlocal.trial.profiler.names import CPU_UTILIZATION


class CPUBottleneck(Bottleneck):
    """Fires when more than `threshold` % of the sampling instants are CPU bottlenecks: some GPU
    below `gpu_threshold` % utilization while the CPU is above `cpu_threshold` %.

    Choices: an instant is a sample time of a node at which both CPU and GPU figures were
    sampled; "the CPU" is its busiest core (a data pipeline saturating one core starves the GPU,
    and the mean over many cores would hide it); "some GPU" is the least used GPU of the node.
    The percentage counts every instant seen, but is judged only once more than `patience`
    instants are in (the start of training, GPUs idle, is not a finding); it is judged at every
    instant after that, so the verdict does not depend on how data is split into windows.
    Without GPU metrics (no GPU, no NVML) there is nothing to judge: NoIssuesFound.
    Details, per node: datapoints, bottlenecks, low_gpu_utilization, bottleneck_percent.
    """

    group = "profiler"
    busy_dimension = CPU_UTILIZATION
    busy_name = "cpu_threshold"

    def __init__(self, base_trial: Any, threshold: object = 50, gpu_threshold: object = 10,
                 cpu_threshold: object = 90, patience: object = 1000,
                 scan_interval_us: object = DEFAULT_SCAN_INTERVAL_US) -> None:
        super().__init__(base_trial, threshold, gpu_threshold, cpu_threshold, patience, scan_interval_us)
