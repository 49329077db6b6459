"""The job record: a training job's state, typed, in one place.

    JobStatus   InProgress -> Stopping -> Stopped        (TrainingJobStatus, SageMaker's words)
                InProgress -> Completed | Failed | Stopped
    RuleStatus  InProgress -> IssuesFound | NoIssuesFound | Error | Stopping -> Stopped
                (evaluator/status.py's `Status`: what an evaluator writes into its status.json)

`TERMINAL` / `RULE_TERMINAL` are the only spelling of "this has ended"; `JobStatus.can_become`
the only table of the moves a job may make. `JobState` is what the lifecycle publishes while a job
runs (its status, SecondaryStatus, each rule's status as the launcher last read it) and what the
others observe: `sdlocal serve`'s DescribeTrainingJob reads a snapshot of it (under a short lock,
never waiting on the job's work), `sdlocal run`'s live line reads it too. `read_record` /
`write_record` / `update_record` are the only code that reads and writes `job.json` (what `summary`,
`logs` and `stop` find of a job once its launcher has gone).
"""
from __future__ import annotations

import enum
import json
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sdlocal.evaluator.status import Status as RuleStatus
from sdlocal.launcher.errors import JobError
from sdlocal.launcher.jobdir.folder import RECORD

if TYPE_CHECKING:
    from sdlocal.launcher.spec.model import JobSpec

__all__ = ["MAX_RUNTIME_EXCEEDED", "MAX_RUNTIME_MESSAGE", "RULE_TERMINAL", "TERMINAL", "JobState", "JobStatus",
           "RecordedRule", "RuleRow", "RuleStatus", "Snapshot", "describe_outcome", "new_record", "read_record", "recorded_rules", "update_record", "write_record"]

# SageMaker's words for a training stopped at StoppingCondition.MaxRuntimeInSeconds: TrainingJobStatus
# Stopped, SecondaryStatus MaxRuntimeExceeded (botocore's sagemaker model); the message is the API
# reference's description of that secondary status (SecondaryStatusTransition).
MAX_RUNTIME_EXCEEDED = "MaxRuntimeExceeded"
MAX_RUNTIME_MESSAGE = "The job stopped because it exceeded the maximum allowed runtime."


class JobStatus(str, enum.Enum):
    IN_PROGRESS = "InProgress"
    COMPLETED = "Completed"
    FAILED = "Failed"
    STOPPING = "Stopping"
    STOPPED = "Stopped"

    @property
    def ended(self) -> bool:
        return self in TERMINAL

    def can_become(self, other: JobStatus) -> bool:
        return other in _MOVES[self]

    def __str__(self) -> str:
        return self.value


TERMINAL = frozenset({JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.STOPPED})
RULE_TERMINAL = frozenset(s for s in RuleStatus if s.is_final)
_MOVES: dict[JobStatus, frozenset[JobStatus]] = {
    JobStatus.IN_PROGRESS: frozenset({JobStatus.STOPPING, *TERMINAL}),
    # a training that ends on its own while being stopped keeps its outcome (SageMaker's too)
    JobStatus.STOPPING: frozenset(TERMINAL),
    **{s: frozenset() for s in TERMINAL},
}


@dataclass(frozen=True)
class RuleRow:
    """One rule's status as the launcher last read it."""

    name: str
    status: RuleStatus
    details: str = ""
    modified: float | str | None = None  # LastModifiedTime as its status file says it


@dataclass(frozen=True)
class Snapshot:
    """What `JobState` holds at one moment (immutable: observers keep it without a lock)."""

    status: JobStatus
    secondary: str
    message: str
    rules: tuple[RuleRow, ...]

    def count(self, status: RuleStatus) -> int:
        return sum(1 for r in self.rules if r.status is status)


class JobState:
    """The state the lifecycle publishes and the others observe. Every change is checked against
    the allowed moves (a job never leaves a terminal status) and told to the listeners."""

    def __init__(self, rules: tuple[str, ...] = ()) -> None:
        self._lock = threading.Lock()
        self._snapshot = Snapshot(JobStatus.IN_PROGRESS, "Starting", "Preparing the instances for training",
                                  tuple(RuleRow(name, RuleStatus.IN_PROGRESS) for name in rules))
        self._listeners: list[Callable[[Snapshot, Snapshot], None]] = []

    def snapshot(self) -> Snapshot:
        with self._lock:
            return self._snapshot

    def listen(self, listener: Callable[[Snapshot, Snapshot], None]) -> None:
        """`listener(before, after)` after each change, on the publishing thread."""
        with self._lock:
            self._listeners.append(listener)

    def phase(self, secondary: str, message: str = "", status: JobStatus | None = None) -> bool:
        """A new SecondaryStatus (and TrainingJobStatus); False when the job has ended already or the
        move is not allowed (a finished job stays as it ended)."""
        def change(s: Snapshot) -> Snapshot | None:
            new = status or s.status
            if new is not s.status and not s.status.can_become(new):
                return None
            if s.status.ended:
                return None
            return Snapshot(new, secondary, message, s.rules)
        return self._change(change)

    def rule(self, name: str, status: RuleStatus, details: str = "", modified: float | str | None = None) -> bool:
        """A rule's status as read from its status.json; False when unchanged."""
        def change(s: Snapshot) -> Snapshot | None:
            new = RuleRow(name, status, details, modified)
            rows = list(s.rules)
            for i, row in enumerate(rows):
                if row.name == name:
                    if row == new:
                        return None
                    rows[i] = new
                    break
            else:
                rows.append(new)
            return Snapshot(s.status, s.secondary, s.message, tuple(rows))
        return self._change(change)

    def _change(self, change: Callable[[Snapshot], Snapshot | None]) -> bool:
        with self._lock:
            before = self._snapshot
            after = change(before)
            if after is None:
                return False
            self._snapshot = after
            listeners = list(self._listeners)
        for listener in listeners:
            listener(before, after)
        return True


# -- job.json: the record a job leaves in its folder ---------------------------------------------
def record_path(job_folder: Path) -> Path:
    return job_folder / RECORD


def read_record(job_folder: Path) -> dict[str, Any] | None:
    """`job.json` of a job folder; None when there is none; JobError naming it when it is corrupt."""
    path = record_path(job_folder)
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise _corrupt(path, e) from None
    if not isinstance(data, dict):
        raise _corrupt(path, TypeError(f"a JSON {type(data).__name__}, not an object"))
    return data


def _corrupt(path: Path, e: BaseException) -> JobError:
    return JobError(f"{path}: corrupt job record ({type(e).__name__}: {e}); "
                    "give --s3-output-path to read the statuses from S3")


@dataclass(frozen=True)
class RecordedRule:
    name: str
    output: str  # its RuleOutput: s3://.../<job>/rule-output/<name>
    profiler: bool
    evaluated: bool  # an evaluator was started for it


def recorded_rules(job_folder: Path, record: Mapping[str, Any]) -> list[RecordedRule]:
    """The rules a record names (JobError naming the file when they are not what it writes)."""
    try:
        return [RecordedRule(str(r["RuleConfigurationName"]), str(r["RuleOutput"]), profiler,
                             not profiler or r.get("Evaluated") is True)  # older records: no profiler rule ran
                for key, profiler in (("DebugRules", False), ("ProfilerRules", True))
                for r in record.get(key, [])]
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        raise _corrupt(record_path(job_folder), e) from None


def write_record(job_folder: Path, record: Mapping[str, Any]) -> None:
    path = record_path(job_folder)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(dict(record), indent=2) + "\n")
    tmp.replace(path)  # a reader never sees half a record


def update_record(job_folder: Path, **fields: Any) -> None:
    """Add fields to `job.json` (those whose value is None are left out); statuses as their words."""
    try:
        record = read_record(job_folder) or {}
    except JobError:
        record = {}
    record.update({k: (v.value if isinstance(v, enum.Enum) else v) for k, v in fields.items() if v is not None})
    write_record(job_folder, record)


def describe_outcome(job_name: str, record: Mapping[str, Any]) -> str | None:
    """'Training job J: Stopped (MaxRuntimeExceeded: The job stopped because ...)' from a job
    record's DescribeTrainingJob-like fields (None before the job ended)."""
    status = record.get("TrainingJobStatus")
    if not status:
        return None
    secondary = record.get("SecondaryStatus")
    line = f"Training job {job_name}: {status}"
    if secondary == MAX_RUNTIME_EXCEEDED:
        line += f" ({secondary}: {MAX_RUNTIME_MESSAGE})"
    if record.get("FailureReason"):
        line += f"\nFailureReason: {record['FailureReason']}"
    return line


def new_record(spec: JobSpec, endpoint_url: str | None, unevaluated: Collection[str] = (),
               endpoint_source: str | None = None) -> dict[str, Any]:
    """The record written before the training starts. `endpoint_url`/`endpoint_source` (S3Endpoint's):
    where `summary` finds the job's statuses again; `Evaluated` says whether a profiler rule got an
    evaluator (records written before profiler rules were evaluated lack it: none did); `summary`
    leaves out those that did not."""
    return {
        "TrainingJobName": spec.job_name,
        "DebugOutput": spec.debug_output,
        "S3EndpointUrl": endpoint_url,
        "S3EndpointSource": endpoint_source,
        "DebugRules": [{"RuleConfigurationName": r.name, "RuleOutput": r.output} for r in spec.debug_rules],
        "ProfilerRules": [{"RuleConfigurationName": r.name, "RuleOutput": r.output, "Evaluated": r.name not in unevaluated}
                          for r in spec.profiler_rules],
    }
