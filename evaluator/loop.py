"""The evaluator loop: follow a (live) trial, evaluate each complete step once, in order, and turn
verdicts into SageMaker rule statuses. Clock and sleep are injected; every wait has a deadline.

Rules that judge time rather than data (StalledTrainingRule) may define
`invoke_idle(idle_s: float) -> Verdict | bool`: the loop calls it on every poll of a live trial
that brought no new step, with the seconds since the loop last saw a new step (or since the
evaluation began, when no step has arrived yet), measured with the injected `clock`. Its
CONDITION_MET counts as the rule firing at the last evaluated step (0 before any step).

Rules that judge the finished training as a whole (Confusion judges the trained classifier) may
define `invoke_at_end() -> Verdict | bool`: the loop calls it exactly once, when training has
ended (or `assume_ended` / `end_step` was reached) and every step has been evaluated, just before
the final status. Its CONDITION_MET (or True) counts as the rule firing at the last evaluated step
(0 before any step): IssuesFound with that step in the details, unless the rule already fired at
an earlier step (the first firing step is the one reported). It is not called when the evaluation
ends Stopped, Error or at the deadline. It is judged as `invoke_at_step` is (`Rule.judge`): its
verdict counts in the rule's report, smdebug's `RuleEvaluationConditionMet` is a firing, missing
data is "not evaluated", and any other exception ends the evaluation with Error.
"""
from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Callable
from typing import Any

from evaluator.rule import Rule, Verdict, as_verdict
from evaluator.status import RuleStatus, Status, client_error_details, condition_met_details
from trial.errors import MissingCollectionFiles
from trial.refresh import no_refresh

NO_DEBUG_DATA = (
    "No debugging data was saved by the training job. Check that the debugger hook was configured "
    "correctly before starting the training job. Exception: "
)

StatusCallback = Callable[[RuleStatus], None]


def _utcnow() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)


class _Reporter:
    """Calls `on_status` whenever the status changes (not for a mere time change)."""

    def __init__(self, first: RuleStatus, on_status: StatusCallback | None, now: Callable[[], _dt.datetime]) -> None:
        self.current = first
        self._reported: RuleStatus | None = None
        self._on_status = on_status
        self._now = now

    def report(self, **changes: Any) -> RuleStatus:
        candidate = self.current.with_changes(**changes)
        if not candidate.same_as(self._reported):
            candidate = candidate.with_changes(last_modified_time=self._now())
            self._reported = candidate
            if self._on_status is not None:
                self._on_status(candidate)
        self.current = candidate
        return candidate


def _fire(verdict: Verdict, rule: Rule, reporter: _Reporter, fired_at: int | None, last_step: int | None) -> int | None:
    """A verdict fires at the last evaluated step (the step just judged; for an idle poll or the
    end of training, the last step judged before, 0 if none): IssuesFound the first time the rule
    fires. Returns the step the rule first fired at."""
    if verdict.fired and fired_at is None:
        fired_at = last_step if last_step is not None else 0
        reporter.report(
            status=Status.ISSUES_FOUND,
            status_details=condition_met_details(rule.rule_name, fired_at),
            last_evaluated_step=last_step,
        )
    return fired_at


def evaluate(
    trial: Any,
    rule: Rule,
    *,
    rule_configuration_name: str | None = None,
    job_arn: str = "",
    interval: float = 2.0,
    deadline: float = 86400.0,
    collections_timeout: float = 600.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    on_status: StatusCallback | None = None,
    start_step: int | None = None,
    end_step: int | None = None,
    assume_ended: bool = False,
    stop_requested: Callable[[], bool] | None = None,
    now: Callable[[], _dt.datetime] = _utcnow,
) -> RuleStatus:
    """Run `rule` over `trial` until training has ended and every step is evaluated; return the
    final status (IssuesFound, NoIssuesFound, Error or Stopped).

    Statuses reported through `on_status`: InProgress first; IssuesFound as soon as the rule fires
    (details name the first step that fired; evaluation goes on); LastEvaluatedStep after each
    poll that evaluated steps; the final status once training has ended (`training_job_end.ts`)
    and a refresh made after that saw no new step. Steps: every global step, ascending, within
    `start_step` ≤ step < `end_step` (end exclusive, as smdebug's rule invoker). A step that was
    not saved for this rule (missing tensors) is "not evaluated", not an error. `assume_ended`
    treats the trial as finished even without its end marker (`sdlocal evaluate` on a folder).
    A rule's `invoke_at_end()` (if any) runs once then, before the final status (module docstring).
    """
    name = rule_configuration_name or rule.rule_name
    reporter = _Reporter(RuleStatus(name, Status.IN_PROGRESS, job_arn=job_arn), on_status, now)
    reporter.report()
    started = clock()

    try:
        trial.wait_for_collections(collections_timeout, interval, sleep=sleep, clock=clock)
    except MissingCollectionFiles as exc:
        return reporter.report(status=Status.ERROR, status_details=client_error_details(NO_DEBUG_DATA + str(exc)))
    except Exception as exc:  # noqa: BLE001 - storage unreachable, corrupt collections file: Error, not a traceback
        return reporter.report(
            status=Status.ERROR,
            status_details=client_error_details(f"Cannot read the trial's collections: {type(exc).__name__}: {exc}"),
        )

    # the job's trial, then the rule's other trials: each refreshed once per poll
    trials = [trial, *(t for t in getattr(rule, "trials", ()) if t is not trial)]
    last_step: int | None = None
    fired_at: int | None = None
    idle_check: Callable[[float], Any] | None = getattr(rule, "invoke_idle", None)
    end_check: Callable[[], Any] | None = getattr(rule, "invoke_at_end", None)
    newest_seen: int | None = None
    progress_at = started  # when the loop last saw a new step (clock time)
    while True:
        step: int | None = None
        if stop_requested is not None and stop_requested():
            return reporter.report(status=Status.STOPPED)
        try:
            ended = assume_ended or bool(trial.training_ended())
            for each in trials:
                each.refresh()
            # a trial whose end marker vanished during the refresh (S3 restarted empty) has not ended
            ended = assume_ended or (ended and bool(trial.training_ended()))
            # One refresh per poll: the poll's steps are judged on what it loaded (no implicit refresh)
            with no_refresh(trials):
                steps = trial.steps(show_incomplete_steps=assume_ended)
                reached_end = False
                if steps and (newest_seen is None or steps[-1] > newest_seen):
                    newest_seen = steps[-1]
                    progress_at = clock()
                elif idle_check is not None and not ended:
                    fired_at = _fire(as_verdict(idle_check(clock() - progress_at)), rule, reporter, fired_at, last_step)
                for candidate in steps:
                    step = candidate
                    if last_step is not None and step <= last_step:
                        continue
                    if start_step is not None and step < start_step:
                        continue
                    if end_step is not None and step >= end_step:
                        reached_end = True
                        break
                    verdict = rule.judge_step(step)
                    last_step = step
                    fired_at = _fire(verdict, rule, reporter, fired_at, last_step)
            step = None
        except Exception as exc:  # noqa: BLE001 - any failure ends this evaluator with status Error
            where = f" at step {step}" if step is not None else ""
            return reporter.report(
                status=Status.ERROR,
                status_details=client_error_details(
                    f"Rule {rule.rule_name} failed{where}: {type(exc).__name__}: {exc}"
                ),
            )
        reporter.report(last_evaluated_step=last_step)
        if ended or reached_end:
            if end_check is not None:
                try:
                    with no_refresh(trials):
                        fired_at = _fire(rule.judge(end_check), rule, reporter, fired_at, last_step)
                except Exception as exc:  # noqa: BLE001 - as in invoke_at_step: the evaluator ends with Error
                    return reporter.report(
                        status=Status.ERROR,
                        status_details=client_error_details(
                            f"Rule {rule.rule_name} failed at the end of training: {type(exc).__name__}: {exc}"
                        ),
                    )
            final = Status.ISSUES_FOUND if fired_at is not None else Status.NO_ISSUES_FOUND
            return reporter.report(status=final)
        if clock() - started >= deadline:
            return reporter.report(
                status=Status.ERROR,
                status_details=client_error_details(
                    f"Rule {rule.rule_name} did not finish within the deadline of {deadline:g} s: "
                    f"training has not ended (last evaluated step {last_step})"
                ),
            )
        sleep(interval)
