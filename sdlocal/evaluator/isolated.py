"""`python -m sdlocal.evaluator.isolated REQUEST.json STATUS.json`: `evaluate_trial` in a process of its own,
for `sdlocal evaluate` (launcher/job/evaluate.py).

A custom rule runs user code: a process of its own keeps a rule that calls `os._exit`, crashes the
interpreter or never returns from taking the CLI down with it silently. REQUEST.json holds
`evaluate_trial`'s keyword arguments plus `rule_timeout_s` (the watchdog's limit,
evaluator/watchdog.py); STATUS.json receives the rule's status (`RuleStatus.to_json()`) each time it
changes, atomically. Exit 0 when the rule ran (IssuesFound/NoIssuesFound), 1 on Error, 2 when the
request cannot be read. The log (stderr) is the evaluator's: INFO lines, the watchdog's notes.
"""
from __future__ import annotations

import json
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Any

from sdlocal.evaluator.api import evaluate_trial
from sdlocal.evaluator.status import RuleStatus, Status, client_error_details, rule_job_arn
from sdlocal.evaluator.watchdog import RuleWatchdog, exit_after_status, install

_OK = (Status.ISSUES_FOUND, Status.NO_ISSUES_FOUND)


def write_atomically(path: Path, status: RuleStatus) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(status.to_json())
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        request: dict[str, Any] = json.loads(Path(argv[0]).read_text())
        status_path = Path(argv[1])
        timeout = float(request.pop("rule_timeout_s"))
    except (IndexError, OSError, ValueError, KeyError, TypeError) as exc:
        print(f"evaluator: usage: python -m sdlocal.evaluator.isolated REQUEST.json STATUS.json ({exc})", file=sys.stderr)
        return 2
    name = request.get("rule_configuration_name") or request["rule_name"]
    arn = rule_job_arn(request.get("job_name", "local"), name)
    writing = threading.Lock()

    def on_status(status: RuleStatus) -> None:
        with writing:
            write_atomically(status_path, status)

    def on_rule_timeout(details: str) -> None:
        status = RuleStatus(name, Status.ERROR, client_error_details(details), job_arn=arn)
        exit_after_status(writing, lambda: write_atomically(status_path, status), sys.stderr)

    watchdog = RuleWatchdog(name, timeout, on_expired=on_rule_timeout,
                            say=lambda line: print(line, file=sys.stderr, flush=True))
    install(watchdog)
    try:
        status = evaluate_trial(**request, on_status=on_status)
    finally:
        install(None)
        watchdog.close()
    on_status(status)
    return 0 if status.status in _OK else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
