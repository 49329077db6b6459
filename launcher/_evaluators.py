"""The job's rule evaluators: one per rule configuration, Debugger and profiler rules alike.

`Evaluators` starts them through the runtime, notices the ones that exited (`settle`: an evaluator
that exited without a final status gets `Error` with its exit code and last log lines) and stops
them (`stop`: the ones without a final status get the status given, `Stopped` or `Error`). The
launcher writes a status only where the evaluator left none: an evaluator's own verdict is never
overwritten. The lifecycle calls `settle` while training runs and while the rules finish.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from launcher.runtime import Handle, RuleLaunch, Runtime
from launcher.spec import RuleSpec
from trial.storage import Storage

FINAL = ("IssuesFound", "NoIssuesFound", "Error", "Stopped")


@dataclass
class Evaluator:
    rule: RuleSpec
    handle: Handle
    output: Storage  # the rule's rule-output prefix (status.json, reports, stop requests)
    settled: bool = False  # its final status is known (its own, or one the launcher wrote)


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
                last = " | ".join(e.handle.last_log_lines(5))
                self._write(e, "Error", f"ClientError: the rule evaluator exited (code {e.handle.poll()}) "
                                        f"without a final status. Last log lines: {last}")
                failed.append(e)
            e.settled = True
        return failed

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
        from evaluator.status import RuleStatus, Status, fake_job_arn, write_status

        write_status(e.output, RuleStatus(e.rule.name, Status(status), details,
                                          job_arn=fake_job_arn(self.job_name, e.rule.name)))


def has_final_status(output: Storage) -> bool:
    from launcher.summary import read_status

    try:
        current = read_status(output)
    except ValueError:  # a torn or foreign status.json: not a final status
        return False
    return current is not None and current.get("RuleEvaluationStatus") in FINAL


def profiler_rule_runs(rule: RuleSpec) -> bool:
    """Whether this version's evaluator evaluates the profiler rule: a built-in its registry
    resolves, or a custom rule (its evaluator loads the file and judges windows of time when the
    class is a ProfilerRule, tensor steps otherwise, as on SageMaker)."""
    from evaluator.errors import UnknownRuleError
    from evaluator.registry import get_rule_class

    if rule.is_custom:
        return True
    try:
        get_rule_class(rule.rule_to_invoke)
    except UnknownRuleError:
        return False
    return True
