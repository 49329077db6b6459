"""`sdlocal evaluate`: one rule on a finished trial, in an evaluator process of its own.

The CLI does not import a custom rule into itself: the rule runs in `python -m sdlocal.evaluator.isolated`
(evaluator/isolated.py), which this module supervises as `sdlocal run` supervises its evaluators:
- the rule timeout (`--rule-timeout`, evaluator/watchdog.py) is the child's: one call of the rule's
  code past it ends the rule `Error`; its notes ("Rule X: step 12 has been evaluating for 30 s
  (limit 60 s)") and the rule's own output (prints, warnings, errors) are relayed to `echo`;
- a child that dies without a status (`os._exit` in the rule file, a crash of the interpreter, a
  signal) reads `Error` saying how it ended and, when it died importing the rule file, that it did;
- the whole evaluation has a deadline (`total_timeout_s`, a day by default as an evaluator's
  SDLOCAL_DEADLINE_S); a stop (Ctrl-C) stops the child and reads `Stopped`.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sdlocal.evaluator.status import RuleStatus, Status, client_error_details, rule_job_arn
from sdlocal.evaluator.watchdog import PREFIX
from sdlocal.launcher.job.evaluator_logs import LogFollower, death_details, is_meaningful, tail_lines
from sdlocal.launcher.runtime.process import start_process
from sdlocal.launcher.wait import Deadline, wait_for

TOTAL_TIMEOUT_S = 86400.0
STOP_GRACE_S = 5.0


def evaluate_isolated(
    trial: str,
    rule_name: str,
    params: Mapping[str, str],
    *,
    custom_rule_file: str | None = None,
    endpoint_env: Mapping[str, str] | None = None,
    rule_timeout_s: float,
    echo: Callable[[str], None] = print,
    stop: threading.Event | None = None,
    python: str = sys.executable,
    total_timeout_s: float = TOTAL_TIMEOUT_S,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The rule's final status (a `RuleStatus.to_dict()`), never an exception for what the rule
    did. `endpoint_env`: AWS_ENDPOINT_URL_S3 and credentials for an s3:// trial (S3Endpoint.child_env);
    `extra`: more keyword arguments of `evaluate_trial`."""
    env = {**os.environ, **(endpoint_env or {})}
    request: dict[str, Any] = {
        "trial_uri": trial, "rule_name": rule_name, "params": dict(params), "custom_rule_file": custom_rule_file,
        "endpoint_url": env.get("AWS_ENDPOINT_URL_S3") if _uses_s3(trial, extra) else None,
        "rule_timeout_s": rule_timeout_s, **(extra or {}),
    }
    with tempfile.TemporaryDirectory(prefix="sdlocal-evaluate-") as tmp:
        folder = Path(tmp)
        (folder / "request.json").write_text(json.dumps(request))
        status_path, log_path = folder / "status.json", folder / "evaluator.log"
        handle = start_process(f"rule {rule_name}", log_path,
                               [python, "-m", "sdlocal.evaluator.isolated", str(folder / "request.json"), str(status_path)],
                               cwd=os.getcwd(), env=env)
        follower = LogFollower(log_path)

        def relay() -> None:
            for line in follower.new_lines():
                if line.startswith(PREFIX):
                    echo(line[len(PREFIX):].rstrip())
                elif is_meaningful(line):
                    echo(line.rstrip())

        def ended() -> bool:
            relay()
            return handle.poll() is not None

        try:
            waited = wait_for(ended, Deadline.after(total_timeout_s), interval=0.2, pause=handle.wait, stop=stop)
        finally:
            handle.stop(STOP_GRACE_S)  # also the rule's own children, whatever happened
        relay()
        if waited.stopped:
            return _status(rule_name, Status.STOPPED, "Stopped: the evaluation was stopped")
        if waited.timed_out:
            return _status(rule_name, Status.ERROR, client_error_details(
                f"the evaluation did not finish within {total_timeout_s:g} s"))
        try:
            return RuleStatus.from_json(status_path.read_text()).to_dict()
        except (OSError, ValueError, KeyError):  # none (it died first), or torn
            return _status(rule_name, Status.ERROR, death_details(handle.exit_info(), tail_lines(log_path)))


def _uses_s3(trial: str, extra: Mapping[str, Any] | None) -> bool:
    """The trial or a report output (profiler rules' `report_output`) is an s3:// prefix."""
    return trial.startswith("s3://") or str((extra or {}).get("report_output") or "").startswith("s3://")


def _status(rule_name: str, status: Status, details: str) -> dict[str, Any]:
    return RuleStatus(rule_name, status, details, job_arn=rule_job_arn("local", rule_name)).to_dict()
