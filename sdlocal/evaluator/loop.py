"""The evaluator loop: follow a (live) job, judge what is new on every poll, and turn verdicts
into SageMaker rule statuses. One driver (`_drive`) for both kinds of rule; what it iterates is a
source: the tensor steps of the debug-output trial (`_StepSource`, tensor rules) or windows of
time of the profiler-output (`sdlocal.evaluator.windows.WindowSource`, profiler rules). Clock and sleep
are injected; every wait has a deadline.

Statuses reported through `on_status`: InProgress first; IssuesFound as soon as the rule fires
(details name where it first fired: a step, or for a profiler rule the scan interval of data
time); LastEvaluatedStep after each poll that evaluated steps (tensor rules); the final status
once training has ended and everything written before its end marker was judged: Error instead
of NoIssuesFound for a rule whose tensors were never saved (evaluator/unjudged.py).

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
from typing import Any, Protocol

from sdlocal.evaluator.rule import Rule, Verdict, as_verdict
from sdlocal.evaluator.status import RuleStatus, Status, client_error_details, condition_met_details
from sdlocal.evaluator.unjudged import never_saw
from sdlocal.trial.errors import MissingCollectionFiles, StorageError
from sdlocal.trial.refresh import no_refresh

NO_DEBUG_DATA = (
    "No debugging data was saved by the training job. Check that the debugger hook was configured "
    "correctly before starting the training job. Exception: "
)

StatusCallback = Callable[[RuleStatus], None]
Fire = Callable[[Verdict, "int | None"], None]


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


class _Firing:
    """IssuesFound the first time the rule fires, naming where (a step or a scan interval)."""

    def __init__(self, rule: Rule, reporter: _Reporter, source: Source) -> None:
        self.rule = rule
        self.reporter = reporter
        self.source = source
        self.fired_at: int | None = None

    def __call__(self, verdict: Verdict, at: int | None) -> None:
        if verdict.fired and self.fired_at is None:
            self.fired_at = at if at is not None else 0
            self.reporter.report(status=Status.ISSUES_FOUND,
                                 status_details=condition_met_details(self.rule.rule_name, self.fired_at),
                                 **self.source.progress())


class Source(Protocol):
    """What the driver iterates (tensor steps or windows of time)."""

    def open(self) -> str | None:
        """Get ready; an error's details when the evaluation cannot start."""

    def poll(self, fire: Fire) -> bool:
        """Refresh, judge what is new; True once everything written before the end is judged."""

    def finish(self, fire: Fire) -> None:
        """The rule's judgement of the finished training (its `invoke_at_end`)."""

    def where(self) -> str:
        """Where the rule was being judged, for an error (" at step 3"), or ""."""

    def progress(self) -> dict[str, Any]:
        """Status fields after a poll (LastEvaluatedStep)."""

    def not_ended(self) -> str:
        """Why the deadline passed ("training has not ended (...)")."""

    def close(self) -> None:
        """The evaluation is over (final, stopped or failed): flush what the rule writes."""


def _drive(source: Source, rule: Rule, reporter: _Reporter, *, interval: float, deadline: float,
           clock: Callable[[], float], sleep: Callable[[float], None],
           stop_requested: Callable[[], bool] | None) -> RuleStatus:
    started = clock()
    fire = _Firing(rule, reporter, source)

    def error(message: str) -> RuleStatus:
        _close(source)
        return reporter.report(status=Status.ERROR, status_details=client_error_details(message))

    problem = source.open()
    if problem is not None:
        return error(problem)
    while True:
        if stop_requested is not None and stop_requested():
            _close(source)
            return reporter.report(status=Status.STOPPED)
        polled_at = clock()
        try:
            done = source.poll(fire)
        except Exception as exc:  # noqa: BLE001 - any failure ends this evaluator with status Error
            return error(f"Rule {rule.rule_name} failed{source.where()}: {type(exc).__name__}: {exc}")
        reporter.report(**source.progress())
        if done:
            try:
                source.finish(fire)
            except Exception as exc:  # noqa: BLE001 - as in a poll: the evaluator ends with Error
                return error(f"Rule {rule.rule_name} failed at the end of training: {type(exc).__name__}: {exc}")
            try:
                source.close()
            except Exception as exc:  # noqa: BLE001 - the final reports could not be written
                return reporter.report(status=Status.ERROR, status_details=client_error_details(
                    f"Rule {rule.rule_name} could not write its reports: {type(exc).__name__}: {exc}"))
            if fire.fired_at is None and isinstance(source, _StepSource):
                blind = never_saw(rule, source.trial)
                if blind:  # nothing was checked: not NoIssuesFound (evaluator/unjudged.py)
                    return reporter.report(status=Status.ERROR, status_details=client_error_details(blind))
            final = Status.ISSUES_FOUND if fire.fired_at is not None else Status.NO_ISSUES_FOUND
            return reporter.report(status=final)
        if clock() - started >= deadline:
            return error(f"Rule {rule.rule_name} did not finish within the deadline of {deadline:g} s: "
                         f"{source.not_ended()}")
        # a poll every `interval`: a slow poll (a backlog of files) does not push the next one back
        sleep(max(0.0, interval - (clock() - polled_at)))


def _close(source: Source) -> None:
    """Best effort on the way out (stopped, failed): the evaluation's status says what happened."""
    try:
        source.close()
    except Exception:  # noqa: BLE001, S110 - nothing more to report than the status being written
        pass


class _StepSource:
    """Tensor rules: every global step of the trial, ascending, each judged once."""

    def __init__(self, trial: Any, rule: Rule, *, collections_timeout: float, interval: float,
                 clock: Callable[[], float], sleep: Callable[[float], None], start_step: int | None,
                 end_step: int | None, assume_ended: bool) -> None:
        self.trial = trial
        self.rule = rule
        self.collections_timeout = collections_timeout
        self.interval = interval
        self.clock = clock
        self.sleep = sleep
        self.start_step = start_step
        self.end_step = end_step
        self.assume_ended = assume_ended
        # the job's trial, then the rule's other trials: each refreshed once per poll
        self.trials = [trial, *(t for t in getattr(rule, "trials", ()) if t is not trial)]
        self.last_step: int | None = None
        self.step: int | None = None  # the step being judged
        self.newest_seen: int | None = None
        self.progress_at = clock()  # when the loop last saw a new step (clock time)
        self.idle_check: Callable[[float], Any] | None = getattr(rule, "invoke_idle", None)
        self.end_check: Callable[[], Any] | None = getattr(rule, "invoke_at_end", None)

    def open(self) -> str | None:
        try:
            self.trial.wait_for_collections(self.collections_timeout, self.interval, sleep=self.sleep, clock=self.clock)
        except MissingCollectionFiles as exc:
            return NO_DEBUG_DATA + str(exc)
        except Exception as exc:  # noqa: BLE001 - storage unreachable, corrupt collections file: Error, not a traceback
            return f"Cannot read the trial's collections: {type(exc).__name__}: {exc}"
        self.progress_at = self.clock()
        return None

    def poll(self, fire: Fire) -> bool:
        ended = self.assume_ended or bool(self.trial.training_ended())
        for each in self.trials:
            each.refresh()
        # a trial whose end marker vanished during the refresh (S3 restarted empty) has not ended
        ended = self.assume_ended or (ended and bool(self.trial.training_ended()))
        reached_end = False
        # One refresh per poll: the poll's steps are judged on what it loaded (no implicit refresh)
        with no_refresh(self.trials):
            steps = self.trial.steps(show_incomplete_steps=self.assume_ended)
            if steps and (self.newest_seen is None or steps[-1] > self.newest_seen):
                self.newest_seen = steps[-1]
                self.progress_at = self.clock()
            elif self.idle_check is not None and not ended:
                fire(as_verdict(self.idle_check(self.clock() - self.progress_at)), self.last_step)
            for candidate in steps:
                self.step = candidate
                if self.last_step is not None and candidate <= self.last_step:
                    continue
                if self.start_step is not None and candidate < self.start_step:
                    continue
                if self.end_step is not None and candidate >= self.end_step:
                    reached_end = True
                    break
                verdict = self.rule.judge_step(candidate)
                self._lost_data()
                self.last_step = candidate
                fire(verdict, candidate)
        self.step = None
        return ended or reached_end

    def finish(self, fire: Fire) -> None:
        if self.end_check is not None:
            with no_refresh(self.trials):
                fire(self.rule.judge(self.end_check), self.last_step)
            self._lost_data()

    def _lost_data(self) -> None:
        """A step whose events file is missing is not "not saved": the verdict would not cover it.
        The first such file (read by the rule, even where it caught the error) ends the rule Error."""
        for each in self.trials:
            missing = getattr(each, "missing_files", ())
            if missing:
                raise StorageError(f"{missing[0]} is missing: the trial's index names it, so the rule "
                                   "cannot judge the step it holds")

    def where(self) -> str:
        return f" at step {self.step}" if self.step is not None else ""

    def progress(self) -> dict[str, Any]:
        return {"last_evaluated_step": self.last_step}

    def not_ended(self) -> str:
        return f"training has not ended (last evaluated step {self.last_step})"

    def close(self) -> None:
        pass


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
    reports: Any = None,
) -> RuleStatus:
    """Run `rule` over `trial` until training has ended and everything is evaluated; return the
    final status (IssuesFound, NoIssuesFound, Error or Stopped).

    Tensor rules: every global step, ascending, within `start_step` ≤ step < `end_step` (end
    exclusive, as smdebug's rule invoker). A step that was not saved for this rule (missing
    tensors) is "not evaluated", not an error. A rule's `invoke_at_end()` (if any) runs once
    before the final status (module docstring).

    Profiler rules (`rule.kind` RuleKind.PROFILER; `trial` is then an
    `sdlocal.evaluator.profiler_trial.ProfilerTrial`): consecutive windows of time (evaluator/windows.py);
    `reports` (an `sdlocal.evaluator.report_files.ReportSink`, optional) receives the rule's JSON reports
    while it runs and once more at the end.

    `assume_ended` treats the trial as finished even without its end marker (`sdlocal evaluate`
    on a folder).
    """
    name = rule_configuration_name or rule.rule_name
    reporter = _Reporter(RuleStatus(name, Status.IN_PROGRESS, job_arn=job_arn), on_status, now)
    reporter.report()
    source: Source
    if getattr(rule, "kind", None) == "profiler":
        from sdlocal.evaluator.windows import WindowSource

        source = WindowSource(trial, rule, assume_ended=assume_ended, reports=reports)  # type: ignore[arg-type]
    else:
        source = _StepSource(trial, rule, collections_timeout=collections_timeout, interval=interval, clock=clock,
                             sleep=sleep, start_step=start_step, end_step=end_step, assume_ended=assume_ended)
    return _drive(source, rule, reporter, interval=interval, deadline=deadline, clock=clock, sleep=sleep,
                  stop_requested=stop_requested)
