"""Rule actions (`action_json` / a rule's `action_str`): what happens the first time a rule fires.

The JSON is a list (or one object) of
`{"name": "stoptraining", "training_job_prefix": "..."}`, `{"name": "email", "endpoint": "a@b.com"}`,
`{"name": "sms", "endpoint": "+15555550100"}` (names case-insensitive, as smdebug_rulesconfig's
`ActionList` serializes them). Parsing problems are a `RuleParameterError` naming the rule and
`action_json` (the evaluator ends `Error`); executing never raises.

- StopTraining: an evaluator cannot call SageMaker. It writes a stop request,
  `<rule-output>/actions/stop-training.json` (`StopTrainingRequest`); the launcher polls for it and stops
  the training job when the job's name STARTS WITH `training_job_prefix` (SageMaker's
  `StopTraining(training_job_prefix)`: "the prefix of the training job to stop"; the SDK fills in
  the job's own name when none is given, and so do we).
- Email / SMS: the SNS topic `SMDebugRules` is created (or found: CreateTopic is idempotent), the
  endpoint is subscribed with protocol `email`/`sms` unless it already is, and one message naming
  the job, the rule and the step is published to the topic.

Each action's outcome is logged (the rule's log) and recorded in `<rule-output>/actions/results.json`;
a failure (SNS unreachable, ...) is not fatal and does not change StatusDetails, which keep
SageMaker's `RuleEvaluationConditionMet: ...` text.
"""
from __future__ import annotations

import datetime as _dt
import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

from sdlocal.evaluator.errors import RuleParameterError
from sdlocal.evaluator.status import RuleStatus, Status
from sdlocal.trial.storage import Storage

STOP_TRAINING = "stoptraining"
EMAIL = "email"
SMS = "sms"
ACTION_NAMES = (STOP_TRAINING, EMAIL, SMS)
SNS_TOPIC_NAME = "SMDebugRules"
STOP_TRAINING_KEY = "actions/stop-training.json"
RESULTS_KEY = "actions/results.json"

logger = logging.getLogger("sdlocal.evaluator.actions")


@dataclass(frozen=True)
class Action:
    name: str  # one of ACTION_NAMES
    training_job_prefix: str | None = None  # stoptraining
    endpoint: str | None = None  # email address / phone number


@dataclass(frozen=True)
class StopTrainingRequest:
    """The object an evaluator writes at `STOP_TRAINING_KEY` for the launcher."""

    rule_configuration_name: str
    job_name: str
    training_job_prefix: str
    step: int | None
    time: str

    def matches(self, job_name: str) -> bool:
        return job_name.startswith(self.training_job_prefix)

    def to_json(self) -> str:
        return json.dumps(
            {"RuleConfigurationName": self.rule_configuration_name, "TrainingJobName": self.job_name,
             "TrainingJobPrefix": self.training_job_prefix, "Step": self.step, "Time": self.time}, indent=1)

    @classmethod
    def from_json(cls, text: str | bytes) -> StopTrainingRequest:
        """Raises ValueError on anything but a stop request object."""
        data = json.loads(text)
        if not isinstance(data, dict) or not isinstance(data.get("TrainingJobPrefix"), str):
            raise ValueError("not a stop request (no TrainingJobPrefix)")
        step = data.get("Step")
        if step is not None and (isinstance(step, bool) or not isinstance(step, int)):
            raise ValueError(f"not a stop request (Step {step!r} is not a step number)")
        return cls(str(data.get("RuleConfigurationName") or ""), str(data.get("TrainingJobName") or ""),
                   data["TrainingJobPrefix"], step, str(data.get("Time") or ""))


def _fail(rule: str, raw: str, reason: str) -> RuleParameterError:
    return RuleParameterError(rule, "action_json", raw, reason)


def _one(rule: str, raw: str, item: Any) -> Action:
    if not isinstance(item, dict):
        raise _fail(rule, raw, f"each action must be a JSON object, got {type(item).__name__}")
    name = item.get("name")
    if not isinstance(name, str) or name.lower() not in ACTION_NAMES:
        raise _fail(rule, raw, f"unknown action name {name!r} (known: StopTraining, Email, SMS)")
    name = name.lower()
    if name == STOP_TRAINING:
        prefix = item.get("training_job_prefix")
        if prefix is not None and (not isinstance(prefix, str) or not prefix.strip()):
            raise _fail(rule, raw, "training_job_prefix must be a non-empty string")
        return Action(name, training_job_prefix=prefix.strip() if prefix else None)
    endpoint = item.get("endpoint")
    if not isinstance(endpoint, str) or not endpoint.strip():
        what = "an email address" if name == EMAIL else "a phone number"
        raise _fail(rule, raw, f"the {name} action needs an 'endpoint' ({what})")
    return Action(name, endpoint=endpoint.strip())


def parse_actions(action_json: str, rule: str) -> tuple[Action, ...]:
    """The actions of `action_json` (empty string: none). The SDK's backslash-escaped quotes are
    accepted. Bad JSON, a non-object or an unknown name raise `RuleParameterError`."""
    raw = (action_json or "").strip()
    if not raw:
        return ()
    try:
        data = json.loads(raw.replace('\\"', '"'))
    except json.JSONDecodeError as exc:
        raise _fail(rule, raw, f"not JSON ({exc})") from None
    items = data if isinstance(data, list) else [data]
    return tuple(dict.fromkeys(_one(rule, raw, item) for item in items))


def merge_actions(*groups: Iterable[Action]) -> tuple[Action, ...]:
    """Several sources (the request's action_json, the rule's own action_str) without duplicates."""
    return tuple(dict.fromkeys(a for group in groups for a in group))


def _utc_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class ActionRunner:
    """Runs the actions once, when the rule first reports IssuesFound. Use `on_status` as (or
    inside) the evaluator's status callback. `output` is the rule-output storage (stop requests
    and results go there; None: StopTraining cannot be requested, e.g. `sdlocal evaluate`);
    `sns_client` makes the SNS client on first use (injected: endpoint, credentials)."""

    def __init__(
        self,
        actions: Iterable[Action],
        *,
        job_name: str,
        rule_configuration_name: str,
        output: Storage | None,
        sns_client: Callable[[], Any],
        now: Callable[[], str] = _utc_iso,
    ) -> None:
        self.actions = tuple(actions)
        self.job_name = job_name
        self.rule_configuration_name = rule_configuration_name
        self.output = output
        self._sns_factory = sns_client
        self._sns: Any = None
        self._now = now
        self.fired = False
        self.results: list[dict[str, Any]] = []

    def on_status(self, status: RuleStatus) -> None:
        if self.fired or status.status is not Status.ISSUES_FOUND or not self.actions:
            return
        self.fired = True
        self.run(status.last_evaluated_step, status.status_details)

    def run(self, step: int | None, details: str = "") -> list[dict[str, Any]]:
        for action in self.actions:
            try:
                outcome = self._execute(action, step, details)
                ok = True
            except Exception as exc:  # noqa: BLE001 - an action failing must not fail the rule
                outcome = f"failed: {type(exc).__name__}: {' '.join(str(exc).split())}"
                ok = False
            (logger.info if ok else logger.warning)("Action %s: %s", action.name, outcome)
            self.results.append({**{k: v for k, v in asdict(action).items() if v is not None},
                                 "ok": ok, "outcome": outcome, "step": step, "time": self._now()})
        if self.output is not None:
            try:
                self.output.write(RESULTS_KEY, json.dumps(self.results, indent=1).encode())
            except Exception as exc:  # noqa: BLE001 - recording is best effort, like the actions
                logger.warning("cannot record the action results: %s", exc)
        return self.results

    def _execute(self, action: Action, step: int | None, details: str) -> str:
        if action.name == STOP_TRAINING:
            prefix = action.training_job_prefix or self.job_name
            if self.output is None:
                return f"not requested: no training job to stop (prefix {prefix!r})"
            request = StopTrainingRequest(self.rule_configuration_name, self.job_name, prefix, step, self._now())
            self.output.write(STOP_TRAINING_KEY, request.to_json().encode())
            return f"stop requested for the training job starting with {prefix!r}"
        return self._notify(action, step, details)

    def _notify(self, action: Action, step: int | None, details: str) -> str:
        if self._sns is None:
            self._sns = self._sns_factory()
        sns = self._sns
        topic = sns.create_topic(Name=SNS_TOPIC_NAME)["TopicArn"]
        assert action.endpoint is not None
        subscribed = False
        for page in sns.get_paginator("list_subscriptions_by_topic").paginate(TopicArn=topic):
            subscribed |= any(s.get("Protocol") == action.name and s.get("Endpoint") == action.endpoint
                              for s in page.get("Subscriptions", []))
        if not subscribed:
            sns.subscribe(TopicArn=topic, Protocol=action.name, Endpoint=action.endpoint)
        at = f" at step {step}" if step is not None else ""
        message = (f"SageMaker Debugger rule {self.rule_configuration_name} of training job {self.job_name} "
                   f"found an issue{at}.\n{details}".rstrip())
        subject = f"Debugger rule {self.rule_configuration_name} fired: {self.job_name}"[:99]
        message_id = sns.publish(TopicArn=topic, Subject=subject, Message=message)["MessageId"]
        return f"published to {topic} for {action.endpoint} (MessageId {message_id})"


def sns_client_factory(endpoint_url: str | None, region: str | None) -> Callable[[], Any]:
    """boto3's SNS client for `endpoint_url` (None: AWS), created when first needed. Actions run
    on the evaluator's loop, so an unreachable SNS must fail in seconds, whatever the endpoint
    (botocore's defaults wait 60 s per connection attempt)."""

    def make() -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client("sns", region_name=region or "us-east-1", endpoint_url=endpoint_url or None,
                            config=Config(connect_timeout=3, read_timeout=10,
                                          retries={"max_attempts": 3, "mode": "standard"}))

    return make
