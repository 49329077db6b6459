"""What the ProfilerReport page shows, as plain frozen data: the rules' reports, the system series,
the step durations per mode, the time per framework phase and the job's summary figures.

`ProfilerReportInput.from_reader(reader, rule_reports, job_name=...)` builds it from a
`sdlocal.trial.profiler.ProfilerReader` and the profiler rules' JSON reports (SageMaker's
`{"RuleTriggered", "Violations", "Details", "Datapoints", "RuleParameters"}`); tests and other
callers can also build it field by field. Times are epoch microseconds, as in trial.profiler.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sdlocal.trial.modes import ModeKeys
from sdlocal.trial.profiler import ProfilerReader, names


@dataclass(frozen=True)
class RuleReport:
    """One profiler rule's verdict. `finding`: one line saying what it found (a default is derived
    from the counts); `error`: why it could not be evaluated (shown instead of a verdict)."""

    name: str
    triggered: int = 0
    violations: int = 0
    datapoints: int = 0
    parameters: Mapping[str, str] = field(default_factory=dict)
    details: Mapping[str, Any] = field(default_factory=dict)
    finding: str | None = None
    error: str | None = None

    @classmethod
    def from_json(cls, name: str, report: Mapping[str, Any]) -> RuleReport:
        """From the rule's JSON report. RuleParameters may be SageMaker's "key:value" lines or a
        mapping; missing counts are 0; "Finding"/"Error" keys, when present, are used."""
        details = report.get("Details")
        return cls(
            name=name,
            triggered=_count(report.get("RuleTriggered")),
            violations=_count(report.get("Violations")),
            datapoints=_count(report.get("Datapoints")),
            parameters=parse_rule_parameters(report.get("RuleParameters")),
            details=details if isinstance(details, Mapping) else {},
            finding=_text_or_none(report.get("Finding")),
            error=_text_or_none(report.get("Error")),
        )


def _count(value: object) -> int:
    if isinstance(value, bool):
        return int(value)
    try:
        return max(0, int(value))  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return 0


def _text_or_none(value: object) -> str | None:
    return None if value is None or value == "" else str(value)


def parse_rule_parameters(value: object) -> dict[str, str]:
    """{"threshold": "20", ...} from "threshold:20\\nmode:None" (SageMaker's form) or a mapping."""
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    out: dict[str, str] = {}
    if isinstance(value, str):
        for line in value.replace(";", "\n").splitlines():
            key, sep, val = line.partition(":")
            if sep and key.strip():
                out[key.strip()] = val.strip()
    return out


@dataclass(frozen=True, eq=False)
class TimeSeries:
    name: str  # "cpu0", "gpu1", "receive"; prefixed with the node when there are several
    timestamps_us: np.ndarray  # int64, ascending
    values: np.ndarray  # float64

    def __len__(self) -> int:
        return int(self.values.shape[0])


@dataclass(frozen=True, eq=False)
class SystemData:
    cpu: tuple[TimeSeries, ...] = ()  # per core, CPUUtilization %
    io_wait: tuple[TimeSeries, ...] = ()  # per core, I/OWaitPercentage %
    gpu: tuple[TimeSeries, ...] = ()  # per GPU, GPUUtilization %
    gpu_memory: tuple[TimeSeries, ...] = ()  # per GPU, GPUMemoryUtilization %
    memory: tuple[TimeSeries, ...] = ()  # per node, MemoryUsedPercent %
    network: tuple[TimeSeries, ...] = ()  # receive / transmit, bytes per second
    disk: tuple[TimeSeries, ...] = ()  # read / write throughput, bytes per second

    @property
    def empty(self) -> bool:
        return not any(len(s) for group in (self.cpu, self.io_wait, self.gpu, self.gpu_memory, self.memory,
                                            self.network, self.disk) for s in group)


@dataclass(frozen=True, eq=False)
class StepDurations:
    mode: str  # "TRAIN", "EVAL", ...
    start_us: np.ndarray  # int64, ascending
    duration_us: np.ndarray  # int64
    step: np.ndarray  # int64, -1 where the trace has no step number

    def __len__(self) -> int:
        return int(self.start_us.shape[0])


@dataclass(frozen=True)
class PhaseTime:
    """Time inside the framework events of one phase ("Forward", "DataLoaderIter", "Step:...")."""

    phase: str
    total_us: int
    count: int


@dataclass(frozen=True)
class JobSummary:
    job_name: str
    start_us: int | None = None  # job start (given, else the first sample or event)
    end_us: int | None = None  # job end (given, else the last sample or event)
    loop_start_us: int | None = None  # the first step's start
    loop_end_us: int | None = None  # the last step's end
    steps: Mapping[str, int] = field(default_factory=dict)  # per mode
    nodes: tuple[str, ...] = ()
    cpu_cores: int = 0
    gpus: int = 0
    ended: bool = True  # False: the job is still running, the report is interim

    @property
    def duration_s(self) -> float | None:
        return _seconds(self.start_us, self.end_us)

    @property
    def loop_s(self) -> float | None:
        return _seconds(self.loop_start_us, self.loop_end_us)

    @property
    def initialization_s(self) -> float | None:
        return _seconds(self.start_us, self.loop_start_us)

    @property
    def finalization_s(self) -> float | None:
        return _seconds(self.loop_end_us, self.end_us)


def _seconds(a: int | None, b: int | None) -> float | None:
    return None if a is None or b is None else max(0.0, (b - a) / 1e6)


@dataclass(frozen=True, eq=False)
class ProfilerReportInput:
    summary: JobSummary
    rules: tuple[RuleReport, ...] = ()
    system: SystemData = field(default_factory=SystemData)
    steps: tuple[StepDurations, ...] = ()
    phases: tuple[PhaseTime, ...] = ()
    generated_us: int = 0
    damaged_lines: int = 0  # profiler data lines the reader skipped as damaged

    @classmethod
    def from_reader(cls, reader: ProfilerReader, rule_reports: Mapping[str, RuleReport | Mapping[str, Any]],
                    *, job_name: str, job_start_us: int | None = None, job_end_us: int | None = None,
                    clock: Callable[[], float] = time.time) -> ProfilerReportInput:
        """Everything the reader has read so far (call `reader.refresh()` first) and the rules'
        reports, keyed by rule name (RuleReport objects or their JSON dicts)."""
        rules = tuple(r if isinstance(r, RuleReport) else RuleReport.from_json(n, r)
                      for n, r in rule_reports.items())
        system = system_from_metrics(reader)
        steps = steps_from_events(reader)
        ranges = [r for r in (reader.system.time_range(), reader.framework.time_range()) if r is not None]
        start = job_start_us if job_start_us is not None else min((r[0] for r in ranges), default=None)
        end = job_end_us if job_end_us is not None else max((r[1] for r in ranges), default=None)
        loop_start = min((int(s.start_us[0]) for s in steps if len(s)), default=None)
        loop_end = max((int((s.start_us + s.duration_us).max()) for s in steps if len(s)), default=None)
        summary = JobSummary(
            job_name=job_name, start_us=start, end_us=end, loop_start_us=loop_start, loop_end_us=loop_end,
            steps={s.mode: len(s) for s in steps}, nodes=tuple(reader.system.nodes()),
            cpu_cores=len(system.cpu), gpus=len(system.gpu), ended=reader.training_ended())
        return cls(summary=summary, rules=rules, system=system, steps=steps, phases=phases_from_events(reader),
                   generated_us=int(clock() * 1e6), damaged_lines=len(reader.damage))


def system_from_metrics(reader: ProfilerReader) -> SystemData:
    """The series the page plots. Names as the system monitor writes them (Type/Name/Dimension):
    cpu/cpuN/CPUUtilization and I/OWaitPercentage, gpu/gpuN/GPUUtilization and
    GPUMemoryUtilization, memory/MemoryUsedPercent/"", network/{Receive,Transmit}BytesPerSecond/
    Algorithm, i/o/{Read,Write}ThroughputInBytesPerSecond/""."""
    metrics = reader.system
    several = len(metrics.nodes()) > 1

    def group(type_: str, *, dimension: str | None = None, name: str | None = None,
              label: str | None = None) -> tuple[TimeSeries, ...]:
        out = []
        for key in metrics.keys(type=type_, dimension=dimension, name=name):
            s = metrics.series(key)
            if len(s):
                shown = label or key.name
                out.append(TimeSeries(f"{key.node} {shown}" if several else shown, s.timestamps_us, s.values))
        return tuple(out)

    return SystemData(
        cpu=group(names.CPU_TYPE, dimension=names.CPU_UTILIZATION),
        io_wait=group(names.CPU_TYPE, dimension=names.IO_WAIT),
        gpu=group(names.GPU_TYPE, dimension=names.GPU_UTILIZATION),
        gpu_memory=group(names.GPU_TYPE, dimension=names.GPU_MEMORY_UTILIZATION),
        memory=group(names.MEMORY_TYPE, name=names.MEMORY_USED_PERCENT, label="memory"),
        network=group(names.NETWORK_TYPE, name=names.RECEIVE_BPS, label="receive")
        + group(names.NETWORK_TYPE, name=names.TRANSMIT_BPS, label="transmit"),
        disk=group(names.IO_TYPE, name=names.READ_BPS, label="read")
        + group(names.IO_TYPE, name=names.WRITE_BPS, label="write"),
    )


def steps_from_events(reader: ProfilerReader) -> tuple[StepDurations, ...]:
    out = []
    for mode in ModeKeys:
        s = reader.framework.steps(mode=mode)
        if len(s):
            out.append(StepDurations(mode.name, s.start_us, s.duration_us, s.step))
    return tuple(out)


def phases_from_events(reader: ProfilerReader, top: int = 12) -> tuple[PhaseTime, ...]:
    """Total time and count per phase, longest first (`top` of them)."""
    ev = reader.framework.arrays()
    if not len(ev.start_us):
        return ()
    dur = np.maximum(ev.end_us - ev.start_us, 0)
    totals = np.bincount(ev.phase_id, weights=dur, minlength=len(ev.phases))
    counts = np.bincount(ev.phase_id, minlength=len(ev.phases))
    order = np.argsort(-totals, kind="stable")[:top]
    return tuple(PhaseTime(ev.phases[i], int(totals[i]), int(counts[i])) for i in order if counts[i])
