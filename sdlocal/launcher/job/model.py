"""What a job run is given (`RunOptions`) and what it gives back (`JobResult`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sdlocal.evaluator.actions import StopTrainingRequest
from sdlocal.evaluator.watchdog import DEFAULT_RULE_TIMEOUT_S
from sdlocal.launcher.job.record import MAX_RUNTIME_EXCEEDED, MAX_RUNTIME_MESSAGE, JobStatus, describe_outcome

__all__ = ["DEFAULT_OPTIONS", "MAX_RUNTIME_EXCEEDED", "MAX_RUNTIME_MESSAGE", "JobResult", "RunOptions",
           "describe_outcome"]

SIGTERM_GRACE_S = 120.0  # SageMaker: SIGTERM, then 120 s for the algorithm to save its model


@dataclass(frozen=True)
class RunOptions:
    poll_interval_s: float = 1.0  # evaluators' polling (SDLOCAL_POLL_INTERVAL_S)
    upload_interval_s: float = 1.0
    rule_finish_timeout_s: float = 600.0  # how long evaluators may run on after training ended (--rule-finish-timeout)
    # the rule timeout: one call of a rule's own code (custom rule import, one step's invoke_at_step),
    # --rule-timeout, SDLOCAL_RULE_TIMEOUT_S (evaluator/watchdog.py)
    rule_timeout_s: float = DEFAULT_RULE_TIMEOUT_S
    stop_grace_s: float = 10.0
    action_poll_interval_s: float = 1.0  # how often to look for rules' StopTraining requests
    collections_timeout_s: float | None = None
    overwrite: bool = False
    # the training is stopped past it, as SageMaker does; None: the request's
    # StoppingCondition.MaxRuntimeInSeconds (default one day)
    max_runtime_s: float | None = None
    max_runtime_grace_s: float = SIGTERM_GRACE_S  # between SIGTERM and SIGKILL at the maximum runtime
    settle_interval_s: float = 1.0  # how often to look for evaluators that died while training runs


DEFAULT_OPTIONS = RunOptions()


@dataclass(frozen=True)
class JobResult:
    job_name: str
    training_exit_code: int | None
    stopped: bool  # stopped by the user (Ctrl-C, SIGTERM, `stop`)
    statuses: list[dict[str, Any]]
    stopped_by_rule: StopTrainingRequest | None = None  # a rule's StopTraining action stopped training
    failure_reason: str | None = None  # SageMaker's FailureReason of a failed training
    model_artifacts: str | None = None  # s3://.../output/model.tar.gz, once published
    max_runtime_exceeded: bool = False  # stopped at its maximum runtime (SageMaker: MaxRuntimeExceeded)

    @property
    def training_failed(self) -> bool:
        # A job stopped by a rule's action or at its maximum runtime is `Stopped`, not `Failed` (the
        # SageMaker SDK's wait accepts Completed and Stopped); its rules finish their evaluation.
        if (self.stopped_by_rule is not None or self.max_runtime_exceeded) and not self.stopped:
            return False
        return self.stopped or self.training_exit_code != 0

    @property
    def training_status(self) -> JobStatus:
        """TrainingJobStatus: Completed, Failed or Stopped."""
        if self.stopped or self.stopped_by_rule is not None or self.max_runtime_exceeded:
            return JobStatus.STOPPED
        return JobStatus.COMPLETED if self.training_exit_code == 0 else JobStatus.FAILED

    @property
    def secondary_status(self) -> str:
        """SecondaryStatus in SageMaker's words once the job ended."""
        if self.max_runtime_exceeded and not self.stopped:
            return MAX_RUNTIME_EXCEEDED
        return self.training_status.value
