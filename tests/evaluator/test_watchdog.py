"""The rule timeout's watchdog on a fake clock: notes while a call of the rule's code runs, one
expiry past the limit, nothing counted between calls (waiting for data is not the rule's time)."""
from __future__ import annotations

from typing import Any

import pytest

from sdlocal.evaluator import watchdog as wd
from sdlocal.evaluator.watchdog import PREFIX, RuleWatchdog


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def make(limit: float = 60.0) -> tuple[RuleWatchdog, Clock, list[str], list[str]]:
    clock, said, expired = Clock(), [], []
    dog = RuleWatchdog("MyRule", limit, on_expired=expired.append, say=said.append, clock=clock)
    return dog, clock, said, expired


def test_notes_every_30_s_then_expires_once() -> None:
    dog, clock, said, expired = make(limit=100.0)
    with dog.phase("step 12", "has been evaluating"):
        for _ in range(130):
            clock.now += 1.0
            dog.check()
    assert said[:3] == [PREFIX + "Rule MyRule: step 12 has been evaluating for 30 s (limit 100 s)",
                        PREFIX + "Rule MyRule: step 12 has been evaluating for 60 s (limit 100 s)",
                        PREFIX + "Rule MyRule: step 12 has been evaluating for 90 s (limit 100 s)"]
    details = ("Rule MyRule: step 12 did not return within the rule timeout of 100 s (--rule-timeout): "
               "the evaluator was stopped")
    assert said[3:] == [PREFIX + details]
    assert expired == [details]  # once, though the call never returned


def test_a_short_limit_notes_at_half_of_it() -> None:
    dog, clock, said, _ = make(limit=10.0)
    with dog.phase("the import of custom rule file r.py"):
        clock.now += 5.0
        dog.check()
    assert said == [PREFIX + "Rule MyRule: the import of custom rule file r.py has been running for 5 s (limit 10 s)"]


def test_time_between_calls_does_not_count() -> None:
    dog, clock, said, expired = make(limit=10.0)
    for step in range(5):
        with dog.phase(f"step {step}"):
            clock.now += 9.0  # each call just within the limit
            dog.check()
        clock.now += 1000.0  # waiting for the next step: not the rule's time
        dog.check()
    assert expired == [] and len(said) == 5


def test_nested_phase_counts_as_the_outer_call() -> None:
    dog, clock, _, expired = make(limit=10.0)
    with dog.phase("step 3"):
        clock.now += 6.0
        with dog.phase("step 4"):  # a rule calling its own invoke_at_step
            clock.now += 6.0
        dog.check()
    assert expired and expired[0].startswith("Rule MyRule: step 3 did not return")


def test_guard_times_each_invoke_at_step() -> None:
    dog, clock, _, expired = make(limit=10.0)

    class Rule:
        def invoke_at_step(self, step: int) -> bool:
            clock.now += 11.0 if step == 2 else 1.0
            dog.check()
            return False

    rule = dog.guard(Rule())
    for step in range(3):
        assert rule.invoke_at_step(step) is False
    assert len(expired) == 1 and expired[0].startswith("Rule MyRule: step 2 did not return")


def test_module_level_marks_do_nothing_without_a_watchdog() -> None:
    assert wd.installed() is None
    with wd.phase("anything"), wd.importing("r.py"):
        pass
    obj: Any = object()
    assert wd.guard(obj) is obj


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan")])
def test_limit_must_be_positive(bad: float) -> None:
    with pytest.raises(ValueError, match="must be a number of seconds > 0"):
        RuleWatchdog("R", bad, on_expired=lambda _: None, say=lambda _: None)
