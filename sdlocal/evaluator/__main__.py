"""`python -m sdlocal.evaluator`: run ONE rule for ONE job, configured by the environment contract of
docs/design.md; writes `<SDLOCAL_RULE_OUTPUT>/status.json` whenever the status changes.
Exit 0 on IssuesFound/NoIssuesFound/Stopped, 1 on Error, 2 when the contract is incomplete
and there is nowhere to write a status.

The rule timeout (`SDLOCAL_RULE_TIMEOUT_S`, evaluator/watchdog.py): a call of the rule's own code
that does not return within it gets the rule's `Error` status written, then the process leaves
at once (exit 1): the hung call is never interrupted, its thread cannot be.

Actions run the first time the rule fires (evaluator/actions.py): StopTraining writes
`<SDLOCAL_RULE_OUTPUT>/actions/stop-training.json` for the launcher; Email/SMS publish to the
SNS topic `SMDebugRules` at `AWS_ENDPOINT_URL_SNS`, else `AWS_ENDPOINT_URL_S3`, else AWS.

A profiler rule (ProfilerReport, StepOutlier, ... or a custom `ProfilerRule`) reads
`SDLOCAL_PROFILER_OUTPUT` (an Error status when it is not set), ends at the end markers of either
output, and writes `<SDLOCAL_RULE_OUTPUT>/profiler-output/profiler-reports/<Rule>.json` while it
runs and at the end (evaluator/report_files.py)."""
from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Mapping
from typing import TextIO

from sdlocal.evaluator import contract
from sdlocal.evaluator.actions import sns_client_factory
from sdlocal.evaluator.api import run_rule
from sdlocal.evaluator.contract import EvaluatorEnv
from sdlocal.evaluator.errors import ContractError
from sdlocal.evaluator.status import RuleStatus, Status, client_error_details, rule_job_arn, write_status
from sdlocal.evaluator.watchdog import RuleWatchdog, exit_after_status, install
from sdlocal.trial.errors import TrialError
from sdlocal.trial.storage import open_storage

_OK = (Status.ISSUES_FOUND, Status.NO_ISSUES_FOUND, Status.STOPPED)


def _contract_failure(exc: ContractError, environ: Mapping[str, str], stderr: TextIO) -> int:
    output = environ.get(contract.RULE_OUTPUT, "").strip()
    print(f"evaluator: {exc}", file=stderr)
    if not output:
        return 2
    name = environ.get(contract.RULE_CONFIGURATION_NAME, "").strip() or "unknown"
    job = environ.get(contract.JOB_NAME, "").strip() or "unknown"
    status = RuleStatus(name, Status.ERROR, client_error_details(str(exc)), job_arn=rule_job_arn(job, name))
    try:
        write_status(open_storage(output, endpoint_url=environ.get("AWS_ENDPOINT_URL_S3") or None), status)
    except (TrialError, OSError) as write_exc:
        print(f"evaluator: cannot write the status to {output}: {write_exc}", file=stderr)
        return 2
    return 1


def main(environ: Mapping[str, str] | None = None, stderr: TextIO = sys.stderr) -> int:
    environ = os.environ if environ is None else environ
    logging.basicConfig(level=logging.INFO, stream=stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        env = EvaluatorEnv.from_environ(environ)
    except ContractError as exc:
        return _contract_failure(exc, environ, stderr)

    stop = {"requested": False}

    def _on_sigterm(signum: int, frame: object) -> None:
        stop["requested"] = True

    signal.signal(signal.SIGTERM, _on_sigterm)
    output = open_storage(env.rule_output, endpoint_url=env.endpoint_url)
    writing = threading.Lock()  # the watchdog's Error is the last status: nothing written after it
    unwritten: list[RuleStatus] = []  # the last status, while S3 did not take it

    def on_status(status: RuleStatus) -> None:
        print(f"evaluator: {status.rule_configuration_name}: {status.status.value} {status.status_details}".rstrip(), file=stderr)
        with writing:
            unwritten[:] = [status]
            try:  # S3 calls ride through outages (trial/storage/_retry.py); past that, one line, not a traceback
                write_status(output, status)
            except TrialError as exc:
                print(f"evaluator: cannot write the status to {env.rule_output} ({exc}); the next status tries again",
                      file=stderr)
                return
            unwritten.clear()

    def on_rule_timeout(details: str) -> None:
        status = RuleStatus(env.rule_configuration_name, Status.ERROR, client_error_details(details),
                            job_arn=rule_job_arn(env.job_name, env.rule_configuration_name))
        exit_after_status(writing, lambda: write_status(output, status), stderr)

    watchdog = RuleWatchdog(env.rule_configuration_name, env.rule_timeout_s, on_expired=on_rule_timeout,
                            say=lambda line: print(line, file=stderr, flush=True))
    previous = install(watchdog)
    try:
        status = run_rule(
            env.debug_output,
            env.rule_parameters,
            rule_configuration_name=env.rule_configuration_name,
            job_name=env.job_name,
            on_status=on_status,
            interval=env.poll_interval_s,
            deadline=env.deadline_s,
            collections_timeout=env.collections_timeout_s,
            endpoint_url=env.endpoint_url,
            stop_requested=lambda: stop["requested"],
            action_output=output,
            sns_client=sns_client_factory(env.sns_endpoint_url, env.region),
            profiler_output=env.profiler_output,
            report_output=output,
        )
    finally:
        install(previous)
        watchdog.close()
    if unwritten:  # the final status: once more (another outage's worth of tries)
        try:
            with writing:
                write_status(output, unwritten[0])
        except TrialError as exc:
            print(f"evaluator: cannot write the final status to {env.rule_output}: {exc}", file=stderr)
            return 1
    return 0 if status.status in _OK else 1


if __name__ == "__main__":
    sys.exit(main())
