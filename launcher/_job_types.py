"""What a job run is given (`RunOptions`) and what it gives back (`JobResult`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evaluator.actions import StopRequest

# SageMaker's default StoppingCondition.MaxRuntimeInSeconds (one day): the training's deadline.
DEFAULT_MAX_RUNTIME_S = 86400.0


@dataclass(frozen=True)
class RunOptions:
    poll_interval_s: float = 1.0  # evaluators' polling (SDLOCAL_POLL_INTERVAL_S)
    upload_interval_s: float = 1.0
    rule_timeout_s: float = 600.0  # how long evaluators may run on after training ended
    stop_grace_s: float = 10.0
    action_poll_interval_s: float = 1.0  # how often to look for rules' StopTraining requests
    collections_timeout_s: float | None = None
    overwrite: bool = False
    max_runtime_s: float = DEFAULT_MAX_RUNTIME_S  # the training is stopped past it, as SageMaker does
    settle_interval_s: float = 1.0  # how often to look for evaluators that died while training runs


DEFAULT_OPTIONS = RunOptions()


@dataclass(frozen=True)
class JobResult:
    job_name: str
    training_exit_code: int | None
    stopped: bool  # stopped by the user (Ctrl-C, SIGTERM, `stop`)
    statuses: list[dict[str, Any]]
    stopped_by_rule: StopRequest | None = None  # a rule's StopTraining action stopped training
    failure_reason: str | None = None  # SageMaker's FailureReason of a failed training
    model_artifacts: str | None = None  # s3://.../output/model.tar.gz, once published
    max_runtime_exceeded: bool = False  # stopped at RunOptions.max_runtime_s (SageMaker: MaxRuntimeExceeded)

    @property
    def training_failed(self) -> bool:
        # A job stopped by a rule's action or at its maximum runtime is `Stopped`, not `Failed` (the
        # SageMaker SDK's wait accepts Completed and Stopped); its rules finish their evaluation.
        if (self.stopped_by_rule is not None or self.max_runtime_exceeded) and not self.stopped:
            return False
        return self.stopped or self.training_exit_code != 0

    @property
    def training_status(self) -> str:
        """TrainingJobStatus in SageMaker's words: Completed, Failed or Stopped."""
        if self.stopped or self.stopped_by_rule is not None or self.max_runtime_exceeded:
            return "Stopped"
        return "Completed" if self.training_exit_code == 0 else "Failed"
