"""The request's `StoppingCondition`, `EnableNetworkIsolation` and
`EnableInterContainerTrafficEncryption`, parsed with the service's limits (botocore's sagemaker
model: MaxRuntimeInSeconds >= 1, MaxWaitTimeInSeconds >= 1, MaxPendingTimeInSeconds 7200-2419200;
the API reference: at most 28 days of runtime, MaxWaitTimeInSeconds >= MaxRuntimeInSeconds).

What sdlocal does with them (launcher/job/lifecycle.py, launcher/runtime/):
- MaxRuntimeInSeconds (default one day, as SageMaker's): the training is stopped past it, as
  SageMaker does: SIGTERM, SIGKILL 120 s later; the job ends `Stopped`, SecondaryStatus
  `MaxRuntimeExceeded`, no FailureReason; the rules finish their evaluation.
- MaxWaitTimeInSeconds (managed Spot): the limit of Spot capacity waits plus runtime; sdlocal
  waits for no capacity, so MaxRuntimeInSeconds (never larger) is the limit that applies.
- MaxPendingTimeInSeconds: a job here is never pending; accepted.
- EnableNetworkIsolation: the training container gets no network at all (SageMaker: "the
  training container does not have network access"; the platform stages inputs and uploads
  outputs, as sdlocal's launcher does anyway). A host process cannot be cut off its network: the
  process runtime refuses such a job in one line.
- EnableInterContainerTrafficEncryption: encrypts traffic between the instances of a distributed
  training; sdlocal runs one training container, so there is none to encrypt (said once).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sdlocal.launcher.errors import SpecError

DEFAULT_MAX_RUNTIME_S = 86400  # SageMaker's default StoppingCondition.MaxRuntimeInSeconds: one day
MAX_RUNTIME_LIMIT_S = 28 * 86400
_PENDING_RANGE = (7200, 2419200)


@dataclass(frozen=True)
class StoppingCondition:
    max_runtime_s: int = DEFAULT_MAX_RUNTIME_S
    max_wait_s: int | None = None
    max_pending_s: int | None = None


@dataclass(frozen=True)
class ContainerSettings:
    network_isolation: bool = False
    traffic_encryption: bool = False


def _seconds(raw: Any, field: str, low: int, high: int | None = None) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise SpecError(field, f"must be an integer number of seconds, got {raw!r}")
    if raw < low or (high is not None and raw > high):
        bounds = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise SpecError(field, f"must be {bounds} seconds, got {raw}")
    return raw


def parse_stopping_condition(raw: Any) -> StoppingCondition:
    if raw is None:
        return StoppingCondition()
    if not isinstance(raw, Mapping):
        raise SpecError("StoppingCondition", f"must be a map, got {type(raw).__name__}")
    unknown = sorted(set(raw) - {"MaxRuntimeInSeconds", "MaxWaitTimeInSeconds", "MaxPendingTimeInSeconds"})
    if unknown:
        raise SpecError(f"StoppingCondition.{unknown[0]}", "unknown field (known: MaxRuntimeInSeconds, "
                                                           "MaxWaitTimeInSeconds, MaxPendingTimeInSeconds)")
    runtime = DEFAULT_MAX_RUNTIME_S
    if raw.get("MaxRuntimeInSeconds") is not None:
        runtime = _seconds(raw["MaxRuntimeInSeconds"], "StoppingCondition.MaxRuntimeInSeconds", 1, MAX_RUNTIME_LIMIT_S)
    wait = None
    if raw.get("MaxWaitTimeInSeconds") is not None:
        wait = _seconds(raw["MaxWaitTimeInSeconds"], "StoppingCondition.MaxWaitTimeInSeconds", 1)
        if wait < runtime:
            raise SpecError("StoppingCondition.MaxWaitTimeInSeconds",
                            f"must be equal to or greater than MaxRuntimeInSeconds ({runtime}), got {wait}")
    pending = None
    if raw.get("MaxPendingTimeInSeconds") is not None:
        pending = _seconds(raw["MaxPendingTimeInSeconds"], "StoppingCondition.MaxPendingTimeInSeconds",
                           *_PENDING_RANGE)
    return StoppingCondition(runtime, wait, pending)


def _flag(raw: Any, field: str) -> bool:
    if raw is None:
        return False
    if not isinstance(raw, bool):
        raise SpecError(field, f"must be true or false, got {raw!r}")
    return raw


def parse_container_settings(request: Mapping[str, Any]) -> ContainerSettings:
    return ContainerSettings(_flag(request.get("EnableNetworkIsolation"), "EnableNetworkIsolation"),
                             _flag(request.get("EnableInterContainerTrafficEncryption"),
                                   "EnableInterContainerTrafficEncryption"))
