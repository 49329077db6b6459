"""GradientsNotReset: gradients left from before an optimizer step when the next backward starts."""
from __future__ import annotations

from typing import Any

from sdlocal.evaluator.params import parse_float, parse_int
from sdlocal.evaluator.rules._records import Line, RecordRule


class GradientsNotReset(RecordRule):
    """Fires when the first backward after an optimizer step finds the gradients of the step before
    still there (no `zero_grad`) in more than `max_stale_fraction` of at least `min_checks` checks.

    Gradient accumulation on purpose (optimizer steps every k backwards, `zero_grad` after each)
    does not fire: only the first backward after a step is checked. The hook checks on its
    recorded steps (a tensor hook that sees `.grad` before autograd adds to it).
    """

    group = "beyond Debugger"

    def __init__(self, base_trial: Any, min_checks: object = 3, max_stale_fraction: object = 0.5,
                 action_str: str = "") -> None:
        super().__init__(base_trial, action_str=action_str)
        self.min_checks = int(parse_int(self.rule_name, "min_checks", min_checks, minimum=1))  # type: ignore[arg-type]
        self.fraction = float(parse_float(self.rule_name, "max_stale_fraction", max_stale_fraction,  # type: ignore[arg-type]
                                          minimum=0.0, maximum=1.0))

    def judge_records(self, lines: list[Line], final: bool) -> bool | None:
        verdict: bool | None = None
        for worker, line in lines:
            counts = line.get("stale_gradients")
            if not counts or line.get("kind") not in ("step", "final"):
                continue
            checked, stale = int(counts[0]), int(counts[1])
            if checked < self.min_checks:
                continue
            if stale > self.fraction * checked:
                self.reason = (f"{worker}: {stale} of {checked} backwards after an optimizer step found the "
                               f"previous gradients still there (no zero_grad between steps), up to step {line['step']}")
                return True
            verdict = False
        return verdict
