"""The rules as the launcher watches them while a job runs: `RuleWatch`.

While the training runs and while the rules finish, every `settle_interval_s` it relays what the
evaluators' rule timeout says (evaluator/watchdog.py), gives Error to each evaluator that died
without a status (`Evaluators.settle`) and prints each rule's status change as it happens (what the
SDK's fit() prints). After training, `wait_rules` waits for the evaluators with the
RunOptions.rule_finish_timeout_s deadline.

A look at S3 that fails (`look`) is said once and tried again at the next tick: never fatal.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from sdlocal.launcher.job.evaluators import Evaluators
from sdlocal.launcher.job.model import RunOptions
from sdlocal.launcher.wait import Deadline, wait_for
from sdlocal.trial.errors import StorageError, one_line


class RuleWatch:
    def __init__(
        self,
        evaluators: Evaluators,
        statuses: Callable[[], list[dict[str, Any]]],  # rule_job_summary() of the job's rules
        *,
        job_name: str,
        options: RunOptions,
        echo: Callable[[str], None],
        clock: Callable[[], float],
        stop: threading.Event,
    ) -> None:
        self.evaluators = evaluators
        self.statuses = statuses
        self.job_name = job_name
        self.options = options
        self.echo = echo
        self.clock = clock
        self.stop = stop
        self._next_check = clock()
        self._failed_looks: list[str] = []
        self._rule_states: dict[str, str] = {}  # the last status said of each rule

    def look(self, look: Callable[[], Any]) -> Any:
        """A look at S3 during a wait (stop requests, evaluators' statuses) that fails is tried
        again at the next tick: said once, never fatal (what must not fail raises elsewhere)."""
        try:
            return look()
        except StorageError as e:
            if not self._failed_looks:
                self.echo(f"Warning: S3 did not answer a check ({one_line(e)}); trying again")
            self._failed_looks.append(one_line(e))
            return None

    def check(self) -> None:
        """Evaluators that died without a status read Error at once (every settle_interval_s), while
        training runs and while the rules finish."""
        if self.clock() < self._next_check:
            return
        self._next_check = self.clock() + self.options.settle_interval_s
        for _, note in self.evaluators.watchdog_notes():
            self.echo(note)
        self.settle()

    def settle(self) -> None:
        """Error for each evaluator that died without a status, said on screen."""
        for e in self.look(self.evaluators.settle) or ():
            self.echo(f"Rule {e.rule.name}: {e.death} without a status: Error "
                      f"(see `sdlocal logs {self.job_name} --rule {e.rule.name}`)")
        self.report_status_changes()

    def report_status_changes(self) -> None:
        """Each rule's status change as it happens: a rule that fires is on screen within a settle
        interval, not at the end."""
        for row in self.look(self.statuses) or ():
            name, status = row["RuleConfigurationName"], row["RuleEvaluationStatus"]
            if self._rule_states.get(name, "InProgress") != status:
                details = " ".join(str(row.get("StatusDetails") or "").split())
                self.echo(f"Rule {name}: {status}" + (f" ({details})" if details else ""))
            self._rule_states[name] = status

    def wait_rules(self) -> None:
        """Wait for the evaluators after training; those still running at the deadline get Error,
        those of a stopped job Stopped."""
        timeout = self.options.rule_finish_timeout_s

        def all_exited() -> bool:
            self.check()
            return not self.evaluators.running()

        waited = wait_for(all_exited, Deadline.after(timeout, self.clock), interval=0.2,
                          pause=self.evaluators.pause, stop=self.stop)
        if waited.stopped:
            self.evaluators.stop("Stopped", "Stopped: the job was stopped")
        elif waited.timed_out:
            self.evaluators.stop("Error", f"ClientError: the evaluator did not finish within {timeout:g}s "
                                          "after training ended")
        self.settle()  # the ones that died since the last check (between checks: not said yet)
