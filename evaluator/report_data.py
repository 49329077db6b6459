"""What ProfilerReport hands the HTML renderer (`evaluator.reports`): one frozen `ReportData`
with every sub-rule's report and the data behind the plots. The renderer needs nothing else
(no reader, no storage), so it can be tested on hand-made instances.

    data = profiler_report_rule.report_data(final=True)
    data.rules            # RuleSummary per sub-rule, in ProfilerReport's order (sort by .triggered)
    data.summary          # JobSummary: start, end, initialization, training loop, steps, cores, GPUs
    data.utilization      # Timeline per node and metric (CPU, GPUs, GPU memory, memory, I/O wait)
    data.steps            # StepDurations per mode
    data.rules[0].report  # the JSON report {"RuleTriggered", "Violations", "Details", "Datapoints", "RuleParameters"}

Times are epoch microseconds (int64 arrays for series), durations seconds, utilizations percent.
"""
from __future__ import annotations

import datetime as _dt
import inspect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evaluator.profiler_rules import _system
from evaluator.profiler_trial import ProfilerTrial
from evaluator.report_files import jsonable
from trial.modes import ModeKeys
from trial.profiler.names import MEMORY_TYPE


@dataclass(frozen=True)
class RuleSummary:
    name: str  # "CPUBottleneck"
    description: str  # what the rule checks (the first paragraph of its docstring)
    recommendation: str  # what to do when it fires
    parameters: tuple[tuple[str, str], ...]  # (name, value) as evaluated
    report: Mapping[str, Any]  # the JSON report, plain JSON values

    @property
    def triggered(self) -> int:
        return int(self.report.get("RuleTriggered") or 0)

    @property
    def violations(self) -> int:
        return int(self.report.get("Violations") or 0)

    @property
    def datapoints(self) -> int:
        return int(self.report.get("Datapoints") or 0)

    @property
    def details(self) -> Mapping[str, Any]:
        return self.report.get("Details") or {}


@dataclass(frozen=True)
class Timeline:
    node: str  # "algo-1"
    metric: str  # "cpu", "gpu", "gpu_memory", "memory", "io_wait"
    name: str  # "cpu" (all cores), "gpu0", "memory", ...
    label: str  # for a legend: "CPU (mean of 8 cores)", "gpu0 utilization", ...
    unit: str  # "%"
    timestamps_us: np.ndarray  # int64, ascending
    values: np.ndarray  # float64


@dataclass(frozen=True)
class StepDurations:
    mode: str  # "TRAIN", "EVAL", ...
    steps: np.ndarray  # int64 step numbers (-1 when the event had none)
    start_us: np.ndarray  # int64
    duration_s: np.ndarray  # float64


@dataclass(frozen=True)
class JobSummary:
    job_name: str
    ended: bool  # training ended and every file was read (the report is final)
    start_us: int | None  # the first profiler datapoint
    end_us: int | None  # the last one
    first_step_us: int | None  # start of the first step event
    last_step_end_us: int | None
    steps: Mapping[str, int] = field(default_factory=dict)  # mode -> step events
    nodes: tuple[str, ...] = ()
    cores: int = 0
    gpus: tuple[str, ...] = ()  # "<node>/<gpu>"
    system_samples: int = 0
    framework_events: int = 0

    @property
    def duration_s(self) -> float | None:
        return None if self.start_us is None or self.end_us is None else (self.end_us - self.start_us) / 1e6

    @property
    def initialization_s(self) -> float | None:
        """From the job's start to the first step."""
        return None if self.start_us is None or self.first_step_us is None else (self.first_step_us - self.start_us) / 1e6

    @property
    def training_loop_s(self) -> float | None:
        if self.first_step_us is None or self.last_step_end_us is None:
            return None
        return (self.last_step_end_us - self.first_step_us) / 1e6

    @property
    def finalization_s(self) -> float | None:
        """From the end of the last step to the job's last datapoint."""
        return None if self.end_us is None or self.last_step_end_us is None else (self.end_us - self.last_step_end_us) / 1e6


@dataclass(frozen=True)
class ReportData:
    summary: JobSummary
    rules: tuple[RuleSummary, ...]
    utilization: tuple[Timeline, ...]
    steps: tuple[StepDurations, ...]
    generated_at: _dt.datetime
    overrides: Mapping[str, str] = field(default_factory=dict)  # ProfilerReport's <Rule>_<param> as given

    @property
    def final(self) -> bool:
        return self.summary.ended


def rule_summary(rule: Any) -> RuleSummary:
    doc = inspect.getdoc(type(rule)) or ""
    params = []
    for line in str(rule.report.get("RuleParameters") or "").splitlines():
        name, _, value = line.partition(":")
        params.append((name, value))
    return RuleSummary(rule.rule_name, " ".join(doc.split("\n\n")[0].split()), getattr(rule, "recommendation", ""),
                       tuple(params), jsonable(rule.report))


def timelines(trial: ProfilerTrial) -> tuple[Timeline, ...]:
    system = trial.system
    out: list[Timeline] = []
    for node in system.nodes():
        cores = _system.cpu_keys(system, node)
        if cores:
            ts, fig = _system.instants(system, [cores], ["mean"], None, None)
            out.append(Timeline(node, "cpu", "cpu", f"CPU (mean of {len(cores)} cores)", "%", ts, fig[:, 0]))
        for key in _system.gpu_keys(system, node):
            s = system.series(key)
            out.append(Timeline(node, "gpu", key.name, f"{key.name} utilization", "%", s.timestamps_us, s.values))
        for key in _system.gpu_memory_keys(system, node):
            s = system.series(key)
            out.append(Timeline(node, "gpu_memory", key.name, f"{key.name} memory", "%", s.timestamps_us, s.values))
        for key in system.keys(type=MEMORY_TYPE, node=node):
            s = system.series(key)
            out.append(Timeline(node, "memory", "memory", "memory used", "%", s.timestamps_us, s.values))
        waits = _system.io_wait_keys(system, node)
        if waits:
            ts, fig = _system.instants(system, [waits], ["mean"], None, None)
            out.append(Timeline(node, "io_wait", "io_wait", "I/O wait (mean of cores)", "%", ts, fig[:, 0]))
    return tuple(out)


def step_durations(trial: ProfilerTrial) -> tuple[StepDurations, ...]:
    steps = trial.framework.steps()
    out = []
    for mode in sorted({int(m) for m in steps.mode.tolist()}):
        rows = steps.mode == mode
        out.append(StepDurations(ModeKeys(mode).name, steps.step[rows], steps.start_us[rows],
                                 steps.duration_us[rows] / 1e6))
    return tuple(out)


def job_summary(trial: ProfilerTrial, job_name: str) -> JobSummary:
    system, framework = trial.system, trial.framework
    steps = framework.steps()
    counts: dict[str, int] = {}
    for mode in steps.mode.tolist():
        name = ModeKeys(int(mode)).name
        counts[name] = counts.get(name, 0) + 1
    gpus = tuple(f"{node}/{k.name}" for node in system.nodes() for k in _system.gpu_keys(system, node))
    return JobSummary(
        job_name=job_name, ended=trial.loaded_all, start_us=trial.first_timestamp_us(),
        end_us=trial.last_timestamp_us(),
        first_step_us=int(steps.start_us.min()) if len(steps) else None,
        last_step_end_us=int(steps.end_us.max()) if len(steps) else None,
        steps=counts, nodes=tuple(system.nodes()), cores=_system.cores(system), gpus=gpus,
        system_samples=len(system), framework_events=len(framework))


def build(trial: ProfilerTrial, rules: Iterable[Any], *, job_name: str,
          overrides: Mapping[str, str] | None = None) -> ReportData:
    return ReportData(summary=job_summary(trial, job_name), rules=tuple(rule_summary(r) for r in rules),
                      utilization=timelines(trial), steps=step_durations(trial),
                      generated_at=_dt.datetime.now(_dt.timezone.utc), overrides=dict(overrides or {}))


__all__ = ["JobSummary", "ReportData", "RuleSummary", "StepDurations", "Timeline", "build"]
