"""The evaluator's environment contract (docs/design.md): read from the environment at call time
into frozen dataclasses, with one error naming the variable (or the RuleParameter)."""
from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from sdlocal.evaluator.actions import parse_actions
from sdlocal.evaluator.errors import ContractError, RuleParameterError
from sdlocal.evaluator.params import parse_int, parse_str_list
from sdlocal.evaluator.watchdog import DEFAULT_RULE_TIMEOUT_S

RESERVED_PARAMETERS = frozenset(
    {"rule_to_invoke", "source_s3_uri", "other_trials", "action_json", "start_step", "end_step"}
)
_OTHER_TRIAL = re.compile(r"^other_trial_(\d+)$")

# The contract's variables: the one spelling of each, for the launcher that writes them
# (`contract_environ`) and the evaluator that reads them (`EvaluatorEnv.from_environ`).
JOB_NAME = "SDLOCAL_JOB_NAME"
RULE_CONFIGURATION_NAME = "SDLOCAL_RULE_CONFIGURATION_NAME"
RULE_PARAMETERS = "SDLOCAL_RULE_PARAMETERS"
DEBUG_OUTPUT = "SDLOCAL_DEBUG_OUTPUT"
RULE_OUTPUT = "SDLOCAL_RULE_OUTPUT"
PROFILER_OUTPUT = "SDLOCAL_PROFILER_OUTPUT"
POLL_INTERVAL_S = "SDLOCAL_POLL_INTERVAL_S"
DEADLINE_S = "SDLOCAL_DEADLINE_S"
COLLECTIONS_TIMEOUT_S = "SDLOCAL_COLLECTIONS_TIMEOUT_S"
RULE_TIMEOUT_S = "SDLOCAL_RULE_TIMEOUT_S"


def contract_environ(
    *,
    job_name: str,
    rule_configuration_name: str,
    rule_parameters: Mapping[str, str],
    debug_output: str,
    rule_output: str,
    profiler_output: str | None = None,
    poll_interval_s: float | None = None,
    deadline_s: float | None = None,
    collections_timeout_s: float | None = None,
    rule_timeout_s: float | None = None,
) -> dict[str, str]:
    """The environment of one evaluator (what `EvaluatorEnv.from_environ` reads back); a value left
    None is not set, so the evaluator's default applies."""
    env = {
        JOB_NAME: job_name,
        RULE_CONFIGURATION_NAME: rule_configuration_name,
        RULE_PARAMETERS: json.dumps(dict(rule_parameters)),
        DEBUG_OUTPUT: debug_output,
        RULE_OUTPUT: rule_output,
    }
    optional = {PROFILER_OUTPUT: profiler_output, POLL_INTERVAL_S: poll_interval_s, DEADLINE_S: deadline_s,
                COLLECTIONS_TIMEOUT_S: collections_timeout_s, RULE_TIMEOUT_S: rule_timeout_s}
    env.update({k: str(v) for k, v in optional.items() if v is not None})
    return env


def _float_var(environ: Mapping[str, str], name: str, default: float) -> float:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ContractError(name, f"expected a number of seconds, got {raw!r}") from None
    if not value > 0:
        raise ContractError(name, f"must be > 0, got {raw!r}")
    return value


@dataclass(frozen=True)
class EvaluatorEnv:
    job_name: str
    rule_configuration_name: str
    rule_parameters: Mapping[str, str]
    debug_output: str
    rule_output: str
    profiler_output: str | None = None
    endpoint_url: str | None = None
    sns_endpoint_url: str | None = None  # AWS_ENDPOINT_URL_SNS, else the S3 endpoint (moto serves both)
    region: str | None = None  # AWS_DEFAULT_REGION / AWS_REGION
    poll_interval_s: float = 2.0
    deadline_s: float = 86400.0
    collections_timeout_s: float = 600.0
    rule_timeout_s: float = DEFAULT_RULE_TIMEOUT_S  # one call of the rule's code (evaluator/watchdog.py)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> EvaluatorEnv:
        env = os.environ if environ is None else environ

        def required(name: str) -> str:
            value = env.get(name, "").strip()
            if not value:
                raise ContractError(name, "is not set")
            return value

        raw_params = required(RULE_PARAMETERS)
        try:
            params = json.loads(raw_params)
        except json.JSONDecodeError as exc:
            raise ContractError(RULE_PARAMETERS, f"not JSON ({exc})") from None
        if not isinstance(params, dict):
            raise ContractError(RULE_PARAMETERS, "expected a JSON object of strings")
        for key, value in params.items():
            if not isinstance(value, str):
                raise ContractError(RULE_PARAMETERS, f"value of {key!r} is not a string")
        return cls(
            job_name=required(JOB_NAME),
            rule_configuration_name=required(RULE_CONFIGURATION_NAME),
            rule_parameters=dict(params),
            debug_output=required(DEBUG_OUTPUT),
            rule_output=required(RULE_OUTPUT),
            profiler_output=env.get(PROFILER_OUTPUT) or None,
            endpoint_url=env.get("AWS_ENDPOINT_URL_S3") or None,
            sns_endpoint_url=env.get("AWS_ENDPOINT_URL_SNS") or env.get("AWS_ENDPOINT_URL_S3") or None,
            region=env.get("AWS_DEFAULT_REGION") or env.get("AWS_REGION") or None,
            poll_interval_s=_float_var(env, POLL_INTERVAL_S, 2.0),
            deadline_s=_float_var(env, DEADLINE_S, 86400.0),
            collections_timeout_s=_float_var(env, COLLECTIONS_TIMEOUT_S, 600.0),
            rule_timeout_s=_float_var(env, RULE_TIMEOUT_S, DEFAULT_RULE_TIMEOUT_S),
        )


@dataclass(frozen=True)
class RuleRequest:
    """RuleParameters split into what the evaluator uses and the rule's constructor arguments."""

    rule_to_invoke: str
    source_s3_uri: str | None = None
    other_trials: tuple[str, ...] = ()
    action_json: str = ""
    start_step: int | None = None
    end_step: int | None = None
    rule_kwargs: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_parameters(cls, params: Mapping[str, str], *, default_rule: str | None = None) -> RuleRequest:
        rule = (params.get("rule_to_invoke") or default_rule or "").strip()
        if not rule:
            raise ContractError(RULE_PARAMETERS, "has no rule_to_invoke")
        others: list[tuple[int, str]] = []
        kwargs: dict[str, str] = {}
        for key, value in params.items():
            match = _OTHER_TRIAL.match(key)
            if match:
                others.append((int(match.group(1)), value))
            elif key not in RESERVED_PARAMETERS:
                kwargs[key] = value
        other_trials = [uri for _, uri in sorted(others)]
        other_trials += list(parse_str_list(rule, "other_trials", params.get("other_trials")))
        action = (params.get("action_json", "") or "").strip()
        if action:
            parse_actions(action, rule)  # bad JSON, unknown action: RuleParameterError naming action_json
            # The SageMaker SDK sends the JSON with backslash-escaped quotes.
            action = action.replace('\\"', '"')
        start = parse_int(rule, "start_step", params.get("start_step"), minimum=0, allow_none=True)
        end = parse_int(rule, "end_step", params.get("end_step"), minimum=0, allow_none=True)
        if start is not None and end is not None and end <= start:
            raise RuleParameterError(rule, "end_step", end, f"must be greater than start_step ({start})")
        return cls(
            rule_to_invoke=rule,
            source_s3_uri=(params.get("source_s3_uri") or "").strip() or None,
            other_trials=tuple(other_trials),
            action_json=action,
            start_step=start,
            end_step=end,
            rule_kwargs=kwargs,
        )
