"""The words of the ProfilerReport page for each built-in profiler rule: what it checks, a one-line
finding when it fired, and what to do about it. Our own wording (SageMaker's report was read for
what it covers, not copied). `{name}` fields are filled from the rule's parameters, falling back to
the built-in defaults (../shared/reference/rules.md) for the ones the report does not carry.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class RuleText:
    checks: str
    fired: str  # the finding when the rule fired; {violations}, {datapoints} and parameters
    advice: str
    defaults: Mapping[str, str]
    summary_only: bool = False  # never fires: reports figures only


RULE_TEXTS: dict[str, RuleText] = {
    "BatchSize": RuleText(
        checks="Looks for a batch size that leaves the machine idle: over the last {window} samples the "
               "95th percentile of total CPU use is below {cpu_threshold_p95}% and, for a GPU, the 95th "
               "percentiles of its utilization and of its memory are below {gpu_threshold_p95}% and "
               "{gpu_memory_threshold_p95}%.",
        fired="CPU and GPU stayed lightly used in {violations} of {datapoints} checks: the batches may be "
              "too small for this machine.",
        advice="Raise the batch size (and scale the learning rate with it), or train on a smaller, cheaper "
               "instance that the current batch size keeps busy.",
        defaults={"cpu_threshold_p95": "70", "gpu_threshold_p95": "70", "gpu_memory_threshold_p95": "70",
                  "patience": "1000", "window": "500"},
    ),
    "CPUBottleneck": RuleText(
        checks="Counts the samples where a GPU is nearly idle (below {gpu_threshold}%) while the CPU is "
               "busy (above {cpu_threshold}%); fires when they are more than {threshold}% of the samples.",
        fired="The GPU waited on a busy CPU in {violations} of {datapoints} samples.",
        advice="Move work off the CPU: more data-loader workers, data prefetching, lighter or cached "
               "preprocessing, or preprocessing on the GPU. Check what else runs on the host.",
        defaults={"threshold": "50", "gpu_threshold": "10", "cpu_threshold": "90", "patience": "1000"},
    ),
    "Dataloader": RuleText(
        checks="Compares the number of parallel data-loader processes with the number of CPU cores: fires "
               "below {min_threshold}% or above {max_threshold}% of the cores.",
        fired="The data loaders did not fit the CPU cores ({violations} of {datapoints} checks).",
        advice="Set the DataLoader's num_workers close to the number of cores: too few starve the training "
               "loop, too many compete with it for the CPU. Pinned memory speeds up copies to a GPU.",
        defaults={"min_threshold": "70", "max_threshold": "200"},
    ),
    "GPUMemoryIncrease": RuleText(
        checks="Follows the moving mean (over {window} samples) of each GPU's memory utilization and fires "
               "when it grows by more than {increase}%.",
        fired="GPU memory use kept growing ({violations} of {datapoints} windows).",
        advice="Look for tensors kept alive across steps (losses accumulated with their graph, growing "
               "lists, caches). If the growth is expected, make sure the peak fits the GPU's memory or "
               "choose a GPU with more of it.",
        defaults={"increase": "5", "patience": "1000", "window": "10"},
    ),
    "IOBottleneck": RuleText(
        checks="Counts the samples where a GPU is nearly idle (below {gpu_threshold}%) while I/O wait is high "
               "(above {io_threshold}%); fires when they are more than {threshold}% of the samples.",
        fired="The GPU waited on I/O in {violations} of {datapoints} samples.",
        advice="Read data faster: prefetch, use more reader workers, store data in fewer larger files or a "
               "binary record format, and copy it to local disk before training when it sits on slow storage.",
        defaults={"threshold": "50", "gpu_threshold": "10", "io_threshold": "50", "patience": "1000"},
    ),
    "LoadBalancing": RuleText(
        checks="Compares the utilization histograms of every pair of GPUs (Jensen-Shannon distance) and fires "
               "when two differ by more than {threshold}.",
        fired="The GPUs did not share the work evenly ({violations} of {datapoints} comparisons).",
        advice="Check how the work is split: data-parallel training should give each GPU the same batch size; "
               "a model split across GPUs may need a different partition or a different distribution strategy.",
        defaults={"threshold": "0.5", "patience": "10"},
    ),
    "LowGPUUtilization": RuleText(
        checks="For each GPU over the last {window} samples: fires when the 95th percentile of utilization is "
               "below {threshold_p95}% (underused), or above it while the 5th percentile is below "
               "{threshold_p5}% (fluctuating).",
        fired="GPU utilization was low or fluctuating in {violations} of {datapoints} checks.",
        advice="Feed the GPU faster (see the CPU and I/O findings), avoid blocking calls in the training loop "
               "(.item(), synchronisation, logging every step), raise the batch size, or use a smaller GPU.",
        defaults={"threshold_p95": "70", "threshold_p5": "10", "window": "500", "patience": "1000"},
    ),
    "MaxInitializationTime": RuleText(
        checks="Fires when no training step has started {threshold} minutes after the job started.",
        fired="The training loop had not started {threshold} minutes after the job started.",
        advice="Find what the start-up waits for: downloading or unpacking data (stream it instead), building "
               "the model or compiling it, or a slow import. Start training on a sample of the data to check.",
        defaults={"threshold": "20"},
    ),
    "OverallSystemUsage": RuleText(
        checks="Summarizes CPU, GPU, memory, network and I/O use per node (percentiles, minimum, maximum). "
               "It never fires.",
        fired="",
        advice="Read it with the system plots of this report: a resource near 100% for long stretches is the first "
               "suspect for a slow training.",
        defaults={},
        summary_only=True,
    ),
    "OverallFrameworkMetrics": RuleText(
        checks="Summarizes how training time splits between steps, forward and backward passes, data loading "
               "and other work. It never fires.",
        fired="",
        advice="A large share outside forward and backward (data loading, 'other') is time the model does not "
               "train: start optimizing there.",
        defaults={},
        summary_only=True,
    ),
    "StepOutlier": RuleText(
        checks="After 100 steps, fires when more than {n_outliers} step durations lie above the mean plus "
               "{stddev} standard deviations (mode: {mode}).",
        fired="{violations} step durations were above the mean plus {stddev} standard deviations.",
        advice="Compare the slow steps with the system plots at the same time: a CPU or I/O spike, a "
               "checkpoint, an evaluation pass or garbage collection often lines up with them.",
        defaults={"stddev": "3", "mode": "None", "n_outliers": "10"},
    ),
}

CUSTOM_TEXT = RuleText(
    checks="A custom profiler rule (not one of the built-in rules): see its own documentation.",
    fired="It fired {triggered} times ({violations} violations in {datapoints} datapoints).",
    advice="See the rule's own documentation.",
    defaults={},
)


class _Defaulting(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def fill(template: str, parameters: Mapping[str, str], defaults: Mapping[str, str], **counts: int) -> str:
    values = _Defaulting(defaults)
    values.update({k: str(v) for k, v in parameters.items()})
    values.update({k: f"{v:,}" for k, v in counts.items()})
    return template.format_map(values)


def rule_text(name: str) -> RuleText:
    return RULE_TEXTS.get(name, CUSTOM_TEXT)
