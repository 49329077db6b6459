"""Running one rule against one trial: the code shared by `python -m sdlocal.evaluator` (a job's live
trial) and `sdlocal evaluate` (`evaluate_trial`, a finished trial).

A tensor rule reads the debug-output trial; a profiler rule (its class's `kind`) reads the job's
profiler-output through an `sdlocal.evaluator.profiler_trial.ProfilerTrial`, finishes at the end markers
of either output, and writes its JSON reports (and ProfilerReport's HTML) into the rule-output
(`report_output`)."""
from __future__ import annotations

import datetime as _dt
import logging
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sdlocal.evaluator import watchdog
from sdlocal.evaluator.actions import ActionRunner, merge_actions, parse_actions
from sdlocal.evaluator.contract import PROFILER_OUTPUT, RuleRequest
from sdlocal.evaluator.errors import ContractError, CustomRuleError, EvaluatorError
from sdlocal.evaluator.loop import StatusCallback, evaluate
from sdlocal.evaluator.profiler_trial import ProfilerTrial
from sdlocal.evaluator.registry import get_rule_class, instantiate_rule, load_custom_rule, rule_kind
from sdlocal.evaluator.report_files import ReportSink
from sdlocal.evaluator.rule import Rule, RuleKind
from sdlocal.evaluator.status import RuleStatus, Status, client_error_details, rule_job_arn
from sdlocal.trial import create_trial
from sdlocal.trial.errors import TrialError
from sdlocal.trial.storage import Storage, open_storage, parse_s3_uri
from sdlocal.trial.writer import END_MARKER


def find_profiler_output(location: str, *, s3_client: Any = None, endpoint_url: str | None = None) -> str:
    """The profiler-output folder of a finished job given as `location` (a local folder or an
    s3:// prefix), the first of these that holds `system/` or `framework/` data: `location`
    itself (a profiler-output folder), `<location>/profiler-output` (a job's S3 prefix,
    `s3://bucket/prefix/<job>`), `<location>/output/profiler` and `<location>/profiler` (an sdlocal
    job folder, `$SDLOCAL_HOME/jobs/<job>`), and the `profiler-output` beside a `debug-output`."""
    base = location.rstrip("/")
    candidates = [base, f"{base}/profiler-output", f"{base}/output/profiler", f"{base}/profiler"]
    if base.endswith("/debug-output"):
        candidates.append(base[: -len("debug-output")] + "profiler-output")
    for candidate in candidates:
        storage = open_storage(candidate, client=s3_client, endpoint_url=endpoint_url)
        if storage.list("system/") or storage.list("framework/"):
            return candidate
    raise EvaluatorError(f"No profiler data under {location}: none of {', '.join(candidates)} "
                         "holds system/ or framework/ files")


def fetch_rule_file(source: str, dest_dir: Path, *, s3_client: Any = None, endpoint_url: str | None = None) -> Path:
    """The custom rule file: an s3:// object downloaded into `dest_dir`, or a local path."""
    if not source.startswith("s3://"):
        return Path(source.removeprefix("file://")).expanduser()
    try:
        _bucket, key = parse_s3_uri(source)
        if not key:
            raise ValueError("no object key")
        folder, _, name = source.rpartition("/")
        target = dest_dir / name
        # the same S3 access (client injection, endpoint) as the trial's
        target.write_bytes(open_storage(folder, client=s3_client, endpoint_url=endpoint_url).read(name))
    except Exception as exc:  # noqa: BLE001 - botocore raises many kinds; all mean "cannot download"
        raise CustomRuleError(f"Cannot download custom rule file {source}: {type(exc).__name__}: {exc}") from exc
    return target


def _rule_class(request: RuleRequest, tmp: Path, *, s3_client: Any, endpoint_url: str | None) -> type[Rule]:
    if request.source_s3_uri:
        path = fetch_rule_file(request.source_s3_uri, tmp, s3_client=s3_client, endpoint_url=endpoint_url)
        with watchdog.importing(path.name):  # the rule's own code runs: --rule-timeout
            return load_custom_rule(path, request.rule_to_invoke)
    return get_rule_class(request.rule_to_invoke)


def _no_sns() -> Any:
    raise EvaluatorError("no SNS endpoint is configured for this evaluator")


def _chain(*callbacks: StatusCallback | None) -> StatusCallback:
    def call(status: RuleStatus) -> None:
        for cb in callbacks:
            if cb is not None:
                cb(status)

    return call


def run_rule(
    trial_uri: str,
    rule_parameters: Mapping[str, str],
    *,
    rule_configuration_name: str,
    job_name: str,
    on_status: StatusCallback | None = None,
    interval: float = 2.0,
    deadline: float = 86400.0,
    collections_timeout: float = 600.0,
    endpoint_url: str | None = None,
    s3_client: Any = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    assume_ended: bool = False,
    stop_requested: Callable[[], bool] | None = None,
    action_output: Storage | None = None,
    sns_client: Callable[[], Any] | None = None,
    profiler_output: str | Callable[[], str] | None = None,
    report_output: Storage | None = None,
) -> RuleStatus:
    """Resolve the rule (built-in or custom), open the trial(s), build the rule from its string
    parameters and evaluate it. Every problem ends as an `Error` status (reported through
    `on_status` and returned), never as an exception.

    Actions (the request's `action_json` and the rule's own `action_str`, evaluator/actions.py)
    run once, the first time the rule fires: StopTraining writes its request into `action_output`
    (the rule-output storage); Email/SMS use `sns_client()`. Without either (`sdlocal evaluate`)
    actions are validated but not run.

    Profiler rules read `profiler_output` (a location, or a function finding it, called only for
    a profiler rule; None for one is an Error status) and also end at the debug-output's end
    marker (`trial_uri`); their reports go to `report_output` when given."""
    arn = rule_job_arn(job_name, rule_configuration_name)
    with tempfile.TemporaryDirectory(prefix="sdlocal-rule-") as tmp:
        try:
            request = RuleRequest.from_parameters(rule_parameters, default_rule=None)
            cls = _rule_class(request, Path(tmp), s3_client=s3_client, endpoint_url=endpoint_url)
            trial: Any
            if rule_kind(cls) == RuleKind.PROFILER:
                trial = _profiler_trial(request.rule_to_invoke, trial_uri, profiler_output,
                                        s3_client=s3_client, endpoint_url=endpoint_url)
                others = []
            else:
                trial = create_trial(trial_uri, s3_client=s3_client, endpoint_url=endpoint_url)
                others = [create_trial(u, s3_client=s3_client, endpoint_url=endpoint_url)
                          for u in request.other_trials]
            with watchdog.phase("the rule's constructor"):
                rule = instantiate_rule(cls, trial, request.rule_kwargs, action_str=request.action_json,
                                        other_trials=others)
            if action_output is not None and hasattr(rule, "report_output"):
                # a report rule (CreateXgboostReport) writes its HTML there
                setattr(rule, "report_output", action_output)  # noqa: B010
                setattr(rule, "job_name", job_name)  # noqa: B010
            rule = watchdog.guard(rule)  # each invoke_at_step / invoke_at_window within --rule-timeout
            actions = merge_actions(parse_actions(request.action_json, request.rule_to_invoke),
                                    parse_actions(getattr(rule, "action_str", "") or "", request.rule_to_invoke))
        except (EvaluatorError, TrialError) as exc:
            status = RuleStatus(
                rule_configuration_name,
                Status.ERROR,
                status_details=client_error_details(str(exc)),
                last_modified_time=_dt.datetime.now(_dt.timezone.utc),
                job_arn=arn,
            )
            if on_status is not None:
                on_status(status)
            return status
        callback = on_status
        if actions and (action_output is not None or sns_client is not None):
            runner = ActionRunner(actions, job_name=job_name, rule_configuration_name=rule_configuration_name,
                                  output=action_output, sns_client=sns_client or _no_sns)
            callback = _chain(on_status, runner.on_status)
        elif actions:
            logging.getLogger("sdlocal.evaluator.actions").info(
                "Actions (%s) are not run here: no job to act on", ", ".join(a.name for a in actions))
        return evaluate(
            trial,
            rule,
            rule_configuration_name=rule_configuration_name,
            job_arn=arn,
            interval=interval,
            deadline=deadline,
            collections_timeout=collections_timeout,
            clock=clock,
            sleep=sleep,
            on_status=callback,
            start_step=request.start_step,
            end_step=request.end_step,
            assume_ended=assume_ended,
            stop_requested=stop_requested,
            reports=ReportSink(report_output) if report_output is not None and rule.kind == RuleKind.PROFILER else None,
        )


def _profiler_trial(rule_name: str, trial_uri: str, location: str | Callable[[], str] | None, *,
                    s3_client: Any, endpoint_url: str | None) -> ProfilerTrial:
    if location is None:
        raise ContractError(PROFILER_OUTPUT,
                            f"is not set: {rule_name} is a profiler rule and the job has no ProfilerConfig")
    where = location if isinstance(location, str) else location()
    debug = open_storage(trial_uri, client=s3_client, endpoint_url=endpoint_url) if trial_uri else None
    ended = (lambda: debug.exists(END_MARKER)) if debug is not None else None
    return ProfilerTrial.open(where, s3_client=s3_client, endpoint_url=endpoint_url, ended=ended)


def evaluate_trial(
    trial_uri: str,
    rule_name: str,
    params: Mapping[str, str],
    *,
    custom_rule_file: str | None = None,
    endpoint_url: str | None = None,
    interval: float = 1.0,
    deadline: float = 3600.0,
    rule_configuration_name: str | None = None,
    job_name: str = "local",
    follow: bool = False,
    on_status: StatusCallback | None = None,
    s3_client: Any = None,
    report_output: str | Storage | None = None,
) -> RuleStatus:
    """Evaluate one rule on a trial (local folder or s3:// prefix) and return the final status.

    By default the trial is taken as finished (even without `training_job_end.ts`): every saved
    step is evaluated once and the result is IssuesFound/NoIssuesFound. `follow=True` follows a
    live trial like a job's evaluator. `params` are RuleParameters (strings; reserved keys such
    as start_step/end_step work); `custom_rule_file` (path or s3://) makes `rule_name` the class
    to load from it. Configuration problems (unknown rule, bad parameter, custom rule that does
    not load) come back as an `Error` status whose StatusDetails say why.

    A profiler rule reads the profiler-output found from `trial_uri` (`find_profiler_output`: a
    job folder or S3 prefix, a profiler-output folder, or a debug-output beside one) and writes
    its reports under `report_output` (a rule-output folder or s3:// prefix) when given.
    """
    rule_params = dict(params)
    rule_params["rule_to_invoke"] = rule_name
    if custom_rule_file:
        rule_params["source_s3_uri"] = str(custom_rule_file)
    return run_rule(
        str(trial_uri),
        rule_params,
        rule_configuration_name=rule_configuration_name or rule_name,
        job_name=job_name,
        on_status=on_status,
        interval=interval,
        deadline=deadline,
        collections_timeout=600.0 if follow else 0.0,
        endpoint_url=endpoint_url,
        s3_client=s3_client,
        assume_ended=not follow,
        profiler_output=lambda: find_profiler_output(str(trial_uri), s3_client=s3_client, endpoint_url=endpoint_url),
        report_output=(None if report_output is None
                       else open_storage(report_output, client=s3_client, endpoint_url=endpoint_url)),
    )
