"""A training job created through `sdlocal serve`: run in a thread on the path `sdlocal run` takes
(launcher/job/run.py) once its queue (launcher/serve/queue.py) has room for it, and what
DescribeTrainingJob says of it (statuses, SecondaryStatusTransitions with their times, the request's
configs echoed, the rules' statuses as its lifecycle published them). Describe reads what the job
holds under one short lock: it never waits on the job's work, nor on S3."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sdlocal.evaluator.status import arn
from sdlocal.launcher.job.metrics import MetricRecorder
from sdlocal.launcher.job.model import RunOptions
from sdlocal.launcher.job.record import MAX_RUNTIME_EXCEEDED, MAX_RUNTIME_MESSAGE, TERMINAL, JobStatus
from sdlocal.launcher.jobdir.folder import JobDir
from sdlocal.launcher.s3.endpoint import S3Endpoint
from sdlocal.launcher.serve.logs import HostLogPumps
from sdlocal.launcher.spec.model import JobSpec
from sdlocal.launcher.statuses.summary import api_rule_status

if TYPE_CHECKING:
    from sdlocal.launcher.job.lifecycle import JobLifecycle
    from sdlocal.launcher.job.record import JobState, Snapshot
    from sdlocal.launcher.serve.queue import JobQueue

# Fields of CreateTrainingJob that DescribeTrainingJob gives back as sent (botocore's sagemaker model:
# the members both shapes share)
ECHOED = (
    "HyperParameters", "AlgorithmSpecification", "RoleArn", "InputDataConfig", "OutputDataConfig", "ResourceConfig",
    "VpcConfig", "StoppingCondition", "EnableNetworkIsolation", "EnableInterContainerTrafficEncryption",
    "EnableManagedSpotTraining", "CheckpointConfig", "DebugHookConfig", "ExperimentConfig", "DebugRuleConfigurations",
    "TensorBoardOutputConfig", "ProfilerConfig", "ProfilerRuleConfigurations", "Environment", "RetryStrategy",
    "RemoteDebugConfig", "InfraCheckConfig", "ServerlessJobConfig", "MlflowConfig", "ModelPackageConfig",
)
# SageMaker's defaults, shown by DescribeTrainingJob when the request left them out
DEFAULTS = {"EnableNetworkIsolation": False, "EnableInterContainerTrafficEncryption": False,
            "EnableManagedSpotTraining": False}
_SECONDARY_OF = {"Completed": ("Completed", "Training job completed"),
                 "Stopped": ("Stopped", "Training job stopped"),
                 "Failed": ("Failed", "Training job failed")}


@dataclass(frozen=True)
class Transition:
    status: str
    message: str
    start: float
    end: float | None = None

    def to_api(self) -> dict[str, Any]:
        out: dict[str, Any] = {"Status": self.status, "StartTime": self.start}
        if self.end is not None:
            out["EndTime"] = self.end
        out["StatusMessage"] = self.message
        return out


class ServedJob:
    """One job: `start()` runs it in a thread; `describe()` is DescribeTrainingJob's answer."""

    def __init__(self, request: Mapping[str, Any], spec: JobSpec, *, job_dir: JobDir, endpoint: S3Endpoint,
                 run: Callable[[ServedJob], Any], logs: Any, region: str, cloudwatch: Any = None,
                 clock: Callable[[], float] = time.time, on_log_error: Callable[[str], None] = lambda m: None,
                 queue: JobQueue | None = None) -> None:
        self.request = dict(request)
        self.spec = spec
        self.job_dir = job_dir
        self.endpoint = endpoint
        self.region = region
        self.clock = clock
        self.arn = arn("training-job", spec.job_name.lower(), region)
        self.state: JobState | None = None  # what its lifecycle publishes, once it runs
        self.stop = threading.Event()
        self.status = JobStatus.IN_PROGRESS
        self.failure_reason: str | None = None
        self.created = self.modified = clock()
        self.training_start: float | None = None
        self.training_end: float | None = None
        self.transitions: list[Transition] = [Transition("Starting", "Preparing the instances for training",
                                                         self.created)]
        # the metrics of the log's lines as they are sent (FinalMetricDataList, CloudWatch's metrics)
        self.metrics = MetricRecorder(spec.job_name, spec.metric_definitions, cloudwatch, on_error=on_log_error)
        self.pump = HostLogPumps(logs, spec.job_name, {host: job_dir.training_log(host) for host in spec.hosts},
                                 clock=clock, on_error=on_log_error,
                                 on_lines=self.metrics.lines if spec.metric_definitions else None)
        self._run = run
        self._queue = queue
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._main, name=f"job-{spec.job_name}", daemon=True)

    @property
    def name(self) -> str:
        return self.spec.job_name

    @property
    def secondary_status(self) -> str:
        return self.transitions[-1].status

    def start(self) -> None:
        """Run now, or once its queue has room."""
        if self._queue is None:
            self.launch()
        else:
            self._queue.submit(self)

    def launch(self) -> None:
        with self._lock:
            if self.status in TERMINAL:  # stopped while it waited
                return
        self._thread.start()

    def waiting(self, message: str) -> None:
        """Its place in the queue: SecondaryStatus Starting, as SageMaker shows a job waiting for capacity."""
        with self._lock:
            last = self.transitions[-1]
            if last.status == "Starting" and self.status is JobStatus.IN_PROGRESS:
                self.transitions[-1] = Transition(last.status, message, last.start)
                self.modified = self.clock()

    def attach(self, lifecycle: JobLifecycle) -> None:
        """The job's lifecycle, once made: what it publishes (launcher/job/record.py's JobState) is
        observed: its SecondaryStatus moves, its rules' statuses (only the state is kept: the
        lifecycle and what it holds go once the job ends)."""
        self.state = lifecycle.state
        lifecycle.state.listen(self._observe)

    def _observe(self, before: Snapshot, after: Snapshot) -> None:
        if (after.secondary, after.status) != (before.secondary, before.status):
            self.phase(after.secondary, after.message)

    def join(self, timeout: float) -> bool:
        if self._thread.ident is not None:  # never started: it waited in the queue
            self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    # -- progress ----------------------------------------------------------------------------------
    def phase(self, status: str, message: str) -> None:
        """JobLifecycle's on_phase: a new SecondaryStatus (the previous one ends now)."""
        if status in _SECONDARY_OF or status == MAX_RUNTIME_EXCEEDED:
            self.pump.finish()  # the whole log is in CloudWatch before the job reads as ended
        with self._lock:
            now = self.clock()
            if status == "Training":
                self.training_start = now
                self.pump.start()
            if status in _SECONDARY_OF or status == MAX_RUNTIME_EXCEEDED:
                self._end(status, message, now)
                return
            if status == self.secondary_status:
                return
            self._move(status, message, now)

    def _move(self, status: str, message: str, now: float) -> None:
        last = self.transitions[-1]
        self.transitions[-1] = Transition(last.status, last.message, last.start, now)
        self.transitions.append(Transition(status, message, now))
        self.modified = now

    def _end(self, secondary: str, reason: str, now: float) -> None:
        """The training's outcome (after publishing): TrainingJobStatus and its last transition."""
        if self.status in TERMINAL:
            return
        status = "Stopped" if secondary == MAX_RUNTIME_EXCEEDED else secondary
        if self.stop.is_set() and status != "Failed":
            status = secondary = "Stopped"
        message = _SECONDARY_OF[status][1]
        if secondary == MAX_RUNTIME_EXCEEDED:
            message = MAX_RUNTIME_MESSAGE
        if self.training_start is not None and self.training_end is None:
            self.training_end = now
        self._move(secondary, message, now)
        self.transitions[-1] = Transition(secondary, message, now, now)
        self.status = JobStatus(status)
        if status == "Failed":
            self.failure_reason = reason or "AlgorithmError: the training failed (see its log)"

    def request_stop(self) -> None:
        """StopTrainingJob: Stopping at once, Stopped once the lifecycle ended the training; a job
        still waiting in the queue is Stopped at once."""
        withdrawn = self._queue is not None and self._queue.withdraw(self)
        with self._lock:
            if self.status in TERMINAL or self.stop.is_set():
                return
            self.stop.set()
            if withdrawn:
                self._end("Stopped", "", self.clock())
                return
            self.status = JobStatus.STOPPING
            self._move("Stopping", "Stopping the training job", self.clock())

    def _main(self) -> None:
        try:
            self._run(self)
        except BaseException as e:  # noqa: BLE001 - the job's outcome, never the server's end
            with self._lock:
                self._end("Failed", f"ClientError: {' '.join(str(e).split()) or type(e).__name__}", self.clock())
        finally:
            self.pump.finish()
            with self._lock:  # a lifecycle that ended without an outcome (stopped before training)
                if self.status not in TERMINAL:
                    self._end("Stopped" if self.stop.is_set() else "Failed", "ClientError: the job ended early",
                              self.clock())
            if self._queue is not None:
                self._queue.done(self)

    # -- DescribeTrainingJob -----------------------------------------------------------------------
    def rule_statuses(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The rules' statuses as the job's lifecycle last published them (it reads them every
        settle interval while the job runs, and at its end): never a wait on S3 or on the job."""
        state = self.state
        published = {r.name: r for r in state.snapshot().rules} if state is not None else {}

        def api(rules: tuple[Any, ...]) -> list[dict[str, Any]]:
            out = []
            for r in rules:
                row = published.get(r.name)
                fields = {"RuleConfigurationName": r.name, "RuleEvaluationStatus": "InProgress"} if row is None else {
                    "RuleConfigurationName": r.name, "RuleEvaluationStatus": row.status.value,
                    "StatusDetails": row.details, "LastModifiedTime": row.modified}
                out.append(api_rule_status(fields, self.name, self.created, self.region))
            return out

        return api(self.spec.debug_rules), api(self.spec.profiler_rules)

    def describe(self) -> dict[str, Any]:
        with self._lock:
            out: dict[str, Any] = {"TrainingJobName": self.name, "TrainingJobArn": self.arn,
                                   "ModelArtifacts": {"S3ModelArtifacts": self.spec.model_artifacts},
                                   "TrainingJobStatus": self.status, "SecondaryStatus": self.secondary_status}
            if self.failure_reason:
                out["FailureReason"] = self.failure_reason
            for key in ECHOED:
                if key in self.request:
                    out[key] = self.request[key]
                elif key in DEFAULTS:
                    out[key] = DEFAULTS[key]
            # what the service fills in (attach() reads them): an empty KmsKeyId, the volume's size
            out["OutputDataConfig"] = {"KmsKeyId": "", **out.get("OutputDataConfig", {})}
            if "ResourceConfig" in out:
                out["ResourceConfig"] = {"VolumeSizeInGB": 30, **out["ResourceConfig"]}
            out["CreationTime"] = self.created
            if self.training_start is not None:
                out["TrainingStartTime"] = self.training_start
            if self.training_end is not None:
                out["TrainingEndTime"] = self.training_end
            out["LastModifiedTime"] = self.modified
            out["SecondaryStatusTransitions"] = [t.to_api() for t in self.transitions]
            if self.spec.metric_definitions:
                # what the service shows: the algorithm's definitions too (training_job_analytics reads them)
                out["AlgorithmSpecification"] = {**out.get("AlgorithmSpecification", {}), "MetricDefinitions": [
                    d.to_request() for d in self.spec.metric_definitions]}
                out["FinalMetricDataList"] = self.metrics.final()
            if self.training_start is not None and self.training_end is not None:
                seconds = max(1, round(self.training_end - self.training_start))
                out["TrainingTimeInSeconds"] = out["BillableTimeInSeconds"] = seconds
        debug, profiler = self.rule_statuses()
        if self.spec.debug_rules:
            out["DebugRuleEvaluationStatuses"] = debug
        if self.spec.profiler_rules:
            out["ProfilerRuleEvaluationStatuses"] = profiler
        profiler_config = self.spec.profiler
        out["ProfilingStatus"] = "Enabled" if profiler_config is not None and profiler_config.sampled else "Disabled"
        return out

    def summary(self) -> dict[str, Any]:
        """ListTrainingJobs' TrainingJobSummary."""
        with self._lock:
            out: dict[str, Any] = {"TrainingJobName": self.name, "TrainingJobArn": self.arn,
                                   "CreationTime": self.created}
            if self.training_end is not None:
                out["TrainingEndTime"] = self.training_end
            out.update(LastModifiedTime=self.modified, TrainingJobStatus=self.status,
                       SecondaryStatus=self.secondary_status)
            return out


def job_folder(home: Path, job_name: str) -> JobDir:
    return JobDir((home / "jobs" / job_name).resolve())


def default_options() -> RunOptions:
    return RunOptions()
