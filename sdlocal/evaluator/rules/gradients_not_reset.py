"""GradientsNotReset: optimizer steps on gradients left from before that optimizer's previous step."""
from __future__ import annotations

from typing import Any

from sdlocal.evaluator.params import parse_float, parse_int
from sdlocal.evaluator.rules._records import Line, RecordRule


class GradientsNotReset(RecordRule):
    """Fires when, for some optimizer, more than `max_stale_fraction` of at least `min_checks`
    checked steps applied gradients never reset (no `zero_grad`, no `grad = None`) since that
    optimizer's previous step.

    Judged per optimizer (the hook's windows: from an optimizer's step to its next one, for the
    parameters it holds; hook/records.py): a GAN's generator backward runs through the
    discriminator after the discriminator's step and fills its gradients, which the discriminator's
    `zero_grad` clears before its next step, so the discriminator's steps are not on stale
    gradients. Gradient accumulation on purpose (a step every k backwards, `zero_grad` after each
    step) does not fire either: one backward of the window found the gradients reset. The hook
    checks the windows opened on its recorded training steps. Records without the per-optimizer
    counts (an older hook) are judged on their totals.
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
            if line.get("kind") not in ("step", "final"):
                continue
            per_optimizer = line.get("stale_by_optimizer")
            if per_optimizer is None:
                counts = line.get("stale_gradients")
                per_optimizer = [counts] if counts else []
            for index, counts in enumerate(per_optimizer):
                checked, stale = int(counts[0]), int(counts[1])
                if checked < self.min_checks:
                    continue
                if stale > self.fraction * checked:
                    held = (self.layouts.get(worker, {}).get("held_by") or [])[index:index + 1]
                    holds = f" (holding {len(held[0])} of the model's parameters)" if held else ""
                    self.reason = (f"{worker}: {stale} of {checked} checked steps of optimizer {index}{holds} applied "
                                   f"gradients not reset since its previous step (no zero_grad between steps), "
                                   f"up to step {line['step']}")
                    return True
                verdict = False
        return verdict
