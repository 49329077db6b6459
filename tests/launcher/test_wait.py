"""launcher/wait.py on a fake clock: ready values, deadlines, stops, pauses bounded by the deadline."""
from __future__ import annotations

import threading

import pytest

from sdlocal.launcher.wait import Deadline, wait_for


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.pauses: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.now += seconds


def test_ready_value_comes_back_and_zero_counts_as_ready() -> None:
    clock = FakeClock()
    answers = iter([None, False, 0])  # an exit code 0 is a value, not "not yet"
    waited = wait_for(lambda: next(answers), Deadline.after(10, clock), interval=0.5, sleep=clock.sleep)
    assert waited.ready and waited.value == 0
    assert clock.pauses == [0.5, 0.5]


def test_deadline_ends_the_wait_and_no_pause_goes_past_it() -> None:
    clock = FakeClock()
    waited = wait_for(lambda: None, Deadline.after(1.3, clock), interval=0.5, sleep=clock.sleep)
    assert waited.timed_out and not waited.ready and waited.value is None
    assert clock.pauses == pytest.approx([0.5, 0.5, 0.3])
    assert clock.now == pytest.approx(101.3)


def test_condition_is_checked_once_more_at_the_deadline() -> None:
    clock = FakeClock()
    waited = wait_for(lambda: clock.now >= 101.0 or None, Deadline.after(1.0, clock), interval=1.0,
                      sleep=clock.sleep)
    assert waited.ready and waited.value is True


def test_stop_ends_the_wait_and_pauses_on_the_event_by_default() -> None:
    clock = FakeClock()
    stop = threading.Event()
    calls = [0]

    def ready() -> None:
        calls[0] += 1
        if calls[0] == 3:
            stop.set()

    waited = wait_for(ready, Deadline.never(clock), interval=0.01, stop=stop)
    assert waited.stopped and not waited.timed_out and calls[0] == 3


def test_pause_is_what_the_caller_blocks_on() -> None:
    clock = FakeClock()
    blocked: list[float] = []

    def pause(seconds: float) -> None:
        blocked.append(seconds)
        clock.now += seconds

    waited = wait_for(lambda: None, Deadline.after(0.25, clock), interval=0.2, pause=pause)
    assert waited.timed_out and blocked == pytest.approx([0.2, 0.05])


def test_deadline_arithmetic_and_bad_values() -> None:
    clock = FakeClock()
    deadline = Deadline.after(2, clock)
    assert deadline.remaining() == 2 and not deadline.expired()
    clock.now += 3
    assert deadline.remaining() == 0 and deadline.expired()
    assert Deadline.never(clock).remaining() == float("inf")
    with pytest.raises(ValueError, match="seconds >= 0"):
        Deadline.after(-1, clock)
    with pytest.raises(ValueError, match="seconds >= 0"):
        Deadline.after(float("nan"), clock)
    with pytest.raises(ValueError, match="interval"):
        wait_for(lambda: None, Deadline.after(1, clock), interval=0)
