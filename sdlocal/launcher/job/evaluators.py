"""The job's rule evaluators: one per rule configuration, Debugger and profiler rules alike.

`Evaluators` starts them through the runtime, notices the ones that exited (`settle`: an evaluator
that exited without a final status gets `Error` with how it ended (exit code, signal, OOM-kill),
whether it died importing its custom rule file, and its last meaningful log lines:
launcher/job/evaluator_logs.py) and stops them (`stop`: the ones without a final status get the
status given, `Stopped` or `Error`). The launcher writes a status only where the evaluator left
none: an evaluator's own verdict is never overwritten. The lifecycle calls `settle` while training
runs and while the rules finish, and `watchdog_notes` to relay what the evaluators' rule timeout
says while it waits (evaluator/watchdog.py).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sdlocal.evaluator.errors import CorruptStatusError
from sdlocal.evaluator.status import RuleStatus, Status, read_status, rule_job_arn, write_status
from sdlocal.launcher.job.evaluator_logs import LogFollower, death_details, summary_of_death, tail_lines
from sdlocal.launcher.runtime import Handle, RuleLaunch, Runtime
from sdlocal.launcher.spec.model import RuleSpec
from sdlocal.trial.storage import Storage


@dataclass
class Evaluator:
    rule: RuleSpec
    handle: Handle
    output: Storage  # the rule's rule-output prefix (status.json, reports, stop requests)
    settled: bool = False  # its final status is known (its own, or one the launcher wrote)
    death: str = ""  # how it ended, when the launcher gave it Error ("its evaluator exited (code 1)")
    follower: LogFollower | None = field(default=None, repr=False)


class Evaluators:
    def __init__(self, runtime: Runtime, job_name: str, open_output: Callable[[str], Storage], *,
                 stop_grace_s: float) -> None:
        self.runtime = runtime
        self.job_name = job_name
        self.open_output = open_output
        self.stop_grace_s = stop_grace_s
        self.started: list[Evaluator] = []

    def start(self, rule: RuleSpec, launch: RuleLaunch) -> Evaluator:
        evaluator = Evaluator(rule, self.runtime.start_rule(launch), self.open_output(rule.output))
        self.started.append(evaluator)
        return evaluator

    def __len__(self) -> int:
        return len(self.started)

    def running(self) -> list[Evaluator]:
        return [e for e in self.started if e.handle.poll() is None]

    def outputs(self) -> dict[str, Storage]:
        return {e.rule.name: e.output for e in self.started}

    def unfinished(self) -> list[Evaluator]:
        """Evaluators running, or exited without their final status looked at."""
        return [e for e in self.started if not e.settled or e.handle.poll() is None]

    def settle(self) -> list[Evaluator]:
        """Give `Error` to each evaluator that exited without a final status (each is looked at
        once, when it exited); the ones given Error by this call. Called while training runs and
        after the final wait."""
        failed = []
        for e in self.started:
            if e.settled or e.handle.poll() is None:
                continue
            if not has_final_status(e.output):
                lines, info = tail_lines(e.handle.log_path), e.handle.exit_info()
                self._write(e, "Error", death_details(info, lines))
                e.death = summary_of_death(info, lines)
                failed.append(e)
            e.settled = True
        return failed

    def watchdog_notes(self) -> list[tuple[Evaluator, str]]:
        """What the evaluators' rule timeouts said since the last call (evaluator/watchdog.py)."""
        notes = []
        for e in self.started:
            if e.settled:
                continue
            if e.follower is None:
                e.follower = LogFollower(e.handle.log_path)
            notes += [(e, note) for note in e.follower.watchdog_notes()]
        return notes

    def pause(self, seconds: float) -> None:
        """Block until one of them exits, at most `seconds` (what a wait for them blocks on)."""
        running = self.running()
        if running:
            running[0].handle.wait(seconds)

    def stop(self, status: str, details: str) -> None:
        """Stop every evaluator still running; those without a final status get `status`."""
        for e in self.started:
            e.handle.stop(self.stop_grace_s)
        for e in self.started:
            if not e.settled and not has_final_status(e.output):
                self._write(e, status, details)
            e.settled = True

    def _write(self, e: Evaluator, status: str, details: str) -> None:
        write_status(e.output, RuleStatus(e.rule.name, Status(status), details,
                                          job_arn=rule_job_arn(self.job_name, e.rule.name)))


def has_final_status(output: Storage) -> bool:
    try:
        current = read_status(output)
    except CorruptStatusError:  # a torn or foreign status.json: not a final status
        return False
    return current is not None and current.status.is_final


def profiler_rule_runs(rule: RuleSpec) -> bool:
    """Whether this version's evaluator evaluates the profiler rule: a built-in its registry
    resolves, or a custom rule (its evaluator loads the file and judges windows of time when the
    class is a ProfilerRule, tensor steps otherwise, as on SageMaker)."""
    from sdlocal.evaluator.errors import UnknownRuleError
    from sdlocal.evaluator.registry import get_rule_class

    if rule.is_custom:
        return True
    try:
        get_rule_class(rule.rule_to_invoke)
    except UnknownRuleError:
        return False
    return True
