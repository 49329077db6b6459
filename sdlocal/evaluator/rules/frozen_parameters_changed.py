"""FrozenParametersChanged: parameters (or a frozen module's statistics) that change though frozen."""
from __future__ import annotations

import re
from typing import Any

from sdlocal.evaluator.errors import RuleParameterError
from sdlocal.evaluator.params import parse_bool
from sdlocal.evaluator.rules._records import Line, RecordRule

# A change below this (relative, of a norm) is rounding, not an update.
RELATIVE_CHANGE = 1e-7


class FrozenParametersChanged(RecordRule):
    """Fires when something meant to stay frozen changes between two training steps with optimizer
    steps between them: a parameter with `requires_grad=False`, a parameter whose name matches
    `frozen_regex` (what the job means to freeze, e.g. a config's frozen stages: `backbone\\.layer1`),
    or (`include_buffers`) a floating buffer of a module whose parameters are all frozen (a frozen
    BatchNorm left in training mode keeps updating its running statistics).
    """

    group = "beyond Debugger"

    def __init__(self, base_trial: Any, frozen_regex: object = None, include_buffers: object = True,
                 action_str: str = "") -> None:
        super().__init__(base_trial, action_str=action_str)
        text = "" if frozen_regex is None else str(frozen_regex).strip()
        try:
            self.frozen_regex = re.compile(text) if text else None
        except re.error as e:
            raise RuleParameterError(self.rule_name, "frozen_regex", frozen_regex, f"not a regex: {e}") from None
        self.include_buffers = parse_bool(self.rule_name, "include_buffers", include_buffers)
        self._previous: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}  # worker -> (layout, line)
        self._layout_at: dict[str, dict[str, Any]] = {}

    def judge_records(self, lines: list[Line], final: bool) -> bool | None:
        verdict: bool | None = None
        for worker, line in lines:
            if line.get("kind") == "layout":
                self._layout_at[worker] = line
                continue
            if line.get("kind") != "step" or line.get("mode") != "TRAIN" or line.get("param_norms") is None:
                continue
            layout = self._layout_at.get(worker)
            if layout is None:
                continue
            before = self._previous.get(worker)
            self._previous[worker] = (layout, line)
            if before is None or before[0]["params"] != layout["params"] or before[0]["buffers"] != layout["buffers"]:
                continue
            if line["optimizer_steps"] <= before[1]["optimizer_steps"]:
                continue
            verdict = False
            frozen = set(layout["frozen"])
            if self.frozen_regex is not None:
                frozen |= {n for n in layout["params"] if self.frozen_regex.search(n)}
            changed = _changed(layout["params"], before[1]["param_norms"], line["param_norms"], frozen)
            if changed:
                self.reason = (f"{worker}: frozen parameter {changed} changed between steps "
                               f"{before[1]['step']} and {line['step']}")
                return True
            if self.include_buffers:
                changed = _changed(layout["buffers"], before[1]["buffer_norms"], line["buffer_norms"],
                                   set(layout.get("frozen_buffers", ())))
                if changed:
                    self.reason = (f"{worker}: {changed} of a frozen module changed between steps "
                                   f"{before[1]['step']} and {line['step']} (the module runs in training mode)")
                    return True
        return verdict


def _changed(names: list[str], before: list[float], after: list[float], watched: set[str]) -> str | None:
    for name, a, b in zip(names, before, after, strict=False):
        if name in watched and abs(a - b) > RELATIVE_CHANGE * max(abs(a), abs(b), 1e-12):
            return name
    return None
