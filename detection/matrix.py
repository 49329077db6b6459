"""Train every scenario, then evaluate every built-in rule on every run through
`sdlocal.evaluator.api.evaluate_trial` (what `sdlocal evaluate` runs) and collect the matrix."""
from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from detection.errors import DetectionError
from detection.hookconfig import EXPECTED_RULES, missing_rules, present_rules
from detection.scenarios import SCENARIOS, Scenario
from detection.training import Setup, train
from detection.xgb import XGBOOST_RULES, XgbSetup, train_xgb
from sdlocal.evaluator.api import evaluate_trial
from sdlocal.evaluator.status import RuleStatus, Status

# Parameters a user must give these rules on ANY run to point them at the data (they have no
# default for it): used on healthy and fault runs alike, listed in the matrix footnotes.
RULE_PARAMETERS: Mapping[str, Mapping[str, str]] = {
    "AllZero": {"collection_names": "weights,gradients"},
    "TensorVariance": {"collection_names": "weights", "max_threshold": "1000", "min_threshold": "1e-8"},
    "CheckInputImages": {"regex": "^ConvNet_input_0$"},
}
# Parameters scaled to these short runs, on every run (footnoted in the matrix): StalledTrainingRule's
# default threshold of 1,800 s could never be crossed by a run of seconds; 4 s can, and is evaluated
# live on the healthy runs (detection.scenarios.LIVE), so a healthy run that stalled would fire.
SCALED_PARAMETERS: Mapping[str, Mapping[str, str]] = {"StalledTrainingRule": {"threshold": "4"}}
# Held-out healthy runs: a rule may fire on at most this share of the held-out healthy runs it
# judges (rounded down: 1 of 6 or of 8 with two held-out seeds). Stated before the held-out seeds
# were run; a rule above it fails tests/detection/test_matrix.py::test_false_alarms_within_budget.
FALSE_ALARM_BUDGET = 0.2
BUDGET = "budget"  # Cell.expected of a held-out healthy cell: counted against FALSE_ALARM_BUDGET
RERUN_SUFFIX = "~rerun"  # a healthy run trained again with the same seed (SimilarAcrossRuns' partner)

FIRED, SILENT, ERROR, NOT_EVALUATED, MISSING = "fired", "silent", "error", "not evaluated", "missing"
# the rule judged nothing: a profiler rule that read no datapoint (a GPU rule on a CPU-only run), or a
# tensor rule whose tensors the run never had (DeadRelu on a model without ReLU: Error "judged
# nothing", evaluator/unjudged.py)
NO_DATA = "no data"
JUDGED_NOTHING = "judged nothing: "


@dataclass(frozen=True)
class Cell:
    rule: str
    run: str
    state: str  # FIRED | SILENT | ERROR | NOT_EVALUATED | MISSING | NO_DATA
    expected: str | None  # "fire" on a target, "silent" on a healthy run, None: not judged
    parameters: Mapping[str, str] = field(default_factory=dict)
    details: str = ""
    seconds: float = 0.0
    live: bool = False  # evaluated on the live trial while it trained (as a job's evaluator does)

    @property
    def wrong(self) -> bool:
        if self.state == MISSING:
            return False  # reported separately (the rule does not exist yet)
        if self.state == ERROR:
            return True
        if self.expected == "fire":
            return self.state != FIRED
        if self.expected == "silent":
            return self.state == FIRED
        return False  # None, or BUDGET: a held-out healthy cell is judged by Results.over_budget()


@dataclass(frozen=True)
class RunInfo:
    name: str
    description: str
    healthy: bool
    targets: tuple[str, ...]
    seconds: float
    losses: Mapping[str, float]  # figures of the run (losses; a profiled run's step times, ...)
    judged: bool = True
    kind: str = "tensor"  # "tensor", "profiled" (a profiled CPU training), "recorded" (a written stream)
    held_out: bool = False  # trained with a held-out seed (judged: targets fire, false alarms in budget)


@dataclass
class Results:
    rules: list[str]
    missing: list[str]
    runs: list[RunInfo] = field(default_factory=list)
    cells: list[Cell] = field(default_factory=list)
    profiler_rules: list[str] = field(default_factory=list)
    fingerprint: str = ""  # detection.fingerprint of the sources the results describe
    complete: bool = False  # every scenario ran (not --only)

    def cell(self, rule: str, run: str) -> Cell:
        for c in self.cells:
            if c.rule == rule and c.run == run:
                return c
        raise KeyError((rule, run))

    def wrong(self) -> list[Cell]:
        return [c for c in self.cells if c.wrong]

    def false_alarms(self) -> dict[str, tuple[int, int]]:
        """Per rule: (held-out healthy runs it fired on, held-out healthy runs it judged: read data on)."""
        out: dict[str, tuple[int, int]] = {}
        for c in self.cells:
            if c.expected == BUDGET and c.state not in (NOT_EVALUATED, MISSING, NO_DATA):
                fired, judged = out.get(c.rule, (0, 0))
                out[c.rule] = (fired + (c.state == FIRED), judged + 1)
        return out

    def over_budget(self) -> dict[str, tuple[int, int]]:
        return {rule: (fired, n) for rule, (fired, n) in self.false_alarms().items()
                if fired > allowed_false_alarms(n)}

    def run(self, name: str) -> RunInfo:
        for r in self.runs:
            if r.name == name:
                return r
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {"rules": self.rules, "missing_rules": self.missing, "profiler_rules": self.profiler_rules,
                "fingerprint": self.fingerprint, "complete": self.complete,
                "runs": [asdict(r) for r in self.runs], "cells": [asdict(c) for c in self.cells]}


def allowed_false_alarms(judged: int) -> int:
    return int(FALSE_ALARM_BUDGET * judged + 1e-9)


def _state(status: RuleStatus) -> str:
    if status.status is Status.ERROR and JUDGED_NOTHING in status.status_details:
        return NO_DATA
    return {Status.ISSUES_FOUND: FIRED, Status.NO_ISSUES_FOUND: SILENT}.get(status.status, ERROR)


def parameters_for(rule: str, scenario: Scenario, trial_of: Callable[[str], Path]) -> dict[str, str] | None:
    """The RuleParameters of `rule` on `scenario`'s run; None when the cell cannot be evaluated
    (SimilarAcrossRuns on a run with nothing to compare with)."""
    params = dict(RULE_PARAMETERS.get(rule, {}))
    params.update(SCALED_PARAMETERS.get(rule, {}))
    params.update(scenario.rule_parameters.get(rule, {}))
    if rule == "SimilarAcrossRuns":
        partner = scenario.compare_with or (scenario.name + RERUN_SUFFIX if _rerun(scenario) else None)
        if partner is None:
            return None
        params["other_trials"] = str(trial_of(partner))
    return params


def _evaluate(rule: str, run: str, trial: Path, params: dict[str, str], expected: str | None,
              *, follow: bool = False) -> Cell:
    started = time.monotonic()
    status = evaluate_trial(str(trial), rule, params, follow=follow, interval=0.25 if follow else 1.0,
                            deadline=120.0, job_name=run)
    return Cell(rule, run, _state(status), expected, params, status.status_details,
                round(time.monotonic() - started, 3), live=follow)


def _rerun(scenario: Scenario) -> bool:
    """A judged healthy run is trained twice (SimilarAcrossRuns compares the two)."""
    return scenario.healthy and scenario.judged and scenario.framework == "pytorch"


def _expected(rule: str, scenario: Scenario) -> str | None:
    if not scenario.judged:
        return None
    if scenario.healthy:
        return BUDGET if scenario.held_out else "silent"
    return "fire" if rule in scenario.targets else None


def run_matrix(workdir: Path, scenarios: Iterable[Scenario] = SCENARIOS,
               log: Callable[[str], None] = lambda _msg: None) -> Results:
    """Train every scenario into `workdir/<run>/` and evaluate every rule on every run."""
    scenarios = list(scenarios)
    rules = present_rules()
    all_rules = [*EXPECTED_RULES, *(r for r in XGBOOST_RULES if r not in EXPECTED_RULES)]
    results = Results(rules=all_rules, missing=missing_rules())
    trial_of = lambda name: workdir / name  # noqa: E731 - a one-line mapping
    live: dict[tuple[str, str], Cell] = {}

    names = {s.name for s in scenarios}
    for scenario in scenarios:
        if scenario.compare_with and scenario.compare_with not in names:
            raise DetectionError(f"scenario {scenario.name} compares with unknown run {scenario.compare_with}")
        for run_name in [scenario.name] + ([scenario.name + RERUN_SUFFIX] if _rerun(scenario) else []):
            trial = trial_of(run_name)
            if trial.exists():
                shutil.rmtree(trial)
            followers = _start_followers(scenario, trial, rules, trial_of, live) if run_name == scenario.name else []
            started = time.monotonic()
            setup = scenario.setup()
            losses = train_xgb(setup, trial) if isinstance(setup, XgbSetup) else train(_torch(setup), trial)
            for t in followers:
                t.join(timeout=180.0)
            if run_name == scenario.name:
                results.runs.append(RunInfo(scenario.name, scenario.description, scenario.healthy, scenario.targets,
                                            round(time.monotonic() - started, 2), losses, scenario.judged,
                                            held_out=scenario.held_out))
            log(f"trained {run_name} in {time.monotonic() - started:.1f} s: {losses}")

    for scenario in scenarios:
        for rule in all_rules:
            if rule not in _rules_of(scenario):  # another framework's rule: no data for it
                results.cells.append(Cell(rule, scenario.name, NOT_EVALUATED, None))
                continue
            expected = _expected(rule, scenario)
            if rule not in rules:
                results.cells.append(Cell(rule, scenario.name, MISSING, expected))
                continue
            if (rule, scenario.name) in live:
                results.cells.append(live[(rule, scenario.name)])
                continue
            params = parameters_for(rule, scenario, trial_of)
            if params is None:
                results.cells.append(Cell(rule, scenario.name, NOT_EVALUATED, expected))
                continue
            cell = _evaluate(rule, scenario.name, trial_of(scenario.name), params, expected)
            results.cells.append(cell)
            if cell.wrong:
                log(f"WRONG {rule} on {scenario.name}: {cell.state} (expected {expected}) {cell.details}")
    return results


def _rules_of(scenario: Scenario) -> tuple[str, ...]:
    return XGBOOST_RULES if scenario.framework == "xgboost" else EXPECTED_RULES


def _torch(setup: object) -> Setup:
    assert isinstance(setup, Setup)
    return setup


def _start_followers(scenario: Scenario, trial: Path, rules: list[str], trial_of: Callable[[str], Path],
                     live: dict[tuple[str, str], Cell]) -> list[threading.Thread]:
    """Rules evaluated on the live trial while it trains (StalledTrainingRule needs time to pass)."""
    threads = []
    for rule in scenario.follow:
        if rule not in rules:
            continue
        params = parameters_for(rule, scenario, trial_of) or {}

        def work(rule: str = rule, params: dict[str, str] = params) -> None:
            live[(rule, scenario.name)] = _evaluate(rule, scenario.name, trial, params,
                                                    _expected(rule, scenario), follow=True)

        t = threading.Thread(target=work, name=f"follow-{rule}", daemon=True)
        t.start()
        threads.append(t)
    return threads
