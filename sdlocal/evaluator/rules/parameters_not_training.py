"""ParametersNotTraining: trainable weights no optimizer holds, or that an optimizer holds and never change."""
from __future__ import annotations

from typing import Any

from sdlocal.evaluator.params import parse_int
from sdlocal.evaluator.rules._records import Line, RecordRule

RELATIVE_CHANGE = 1e-7


class ParametersNotTraining(RecordRule):
    """Fires when a trainable weight (`requires_grad=True`, two or more dimensions: weights and
    embeddings, not biases, which a following normalisation may leave without gradient) does not
    train: no optimizer holds it after `min_optimizer_steps` optimizer steps (a module built lazily
    after the optimizer was made, e.g. first run by an evaluation), or an optimizer holds it and it
    never changed over the training's recorded steps (judged at the end, with at least
    `min_optimizer_steps` optimizer steps recorded between the first and the last).
    """

    group = "beyond Debugger"

    def __init__(self, base_trial: Any, min_optimizer_steps: object = 3, action_str: str = "") -> None:
        super().__init__(base_trial, action_str=action_str)
        self.min_steps = int(parse_int(self.rule_name, "min_optimizer_steps", min_optimizer_steps, minimum=1))  # type: ignore[arg-type]
        self._layout: dict[str, dict[str, Any]] = {}
        self._first: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
        self._last: dict[str, dict[str, Any]] = {}

    def judge_records(self, lines: list[Line], final: bool) -> bool | None:
        verdict: bool | None = None
        for worker, line in lines:
            if line.get("kind") == "layout":
                self._layout[worker] = line
                self._first.pop(worker, None)  # compare within one layout only
                continue
            if line.get("kind") != "step" or line.get("mode") != "TRAIN" or line.get("param_norms") is None:
                continue
            layout = self._layout.get(worker)
            if layout is None:
                continue
            self._first.setdefault(worker, (layout, line))
            self._last[worker] = line
            if layout["optimizers"] and line["optimizer_steps"] >= self.min_steps:
                verdict = False
                frozen, held = set(layout["frozen"]), set(layout["held"])
                for name, ndim in zip(layout["params"], layout["ndims"], strict=False):
                    if name not in frozen and name not in held and ndim != 1 and ndim != 0:
                        where = (" (registered during an evaluation: a lazily built module first run by an "
                                 "evaluation, after the optimizer was made)" if name in layout["new_in_eval"] else "")
                        self.reason = f"{worker}: trainable parameter {name} is held by no optimizer{where}"
                        return True
        if final:
            for worker, (layout, first) in self._first.items():
                last = self._last[worker]
                if last["optimizer_steps"] - first["optimizer_steps"] < self.min_steps:
                    continue
                verdict = False
                frozen, held = set(layout["frozen"]), set(layout["held"])
                for name, ndim, a, b in zip(layout["params"], layout["ndims"], first["param_norms"], last["param_norms"], strict=False):
                    if name in held and name not in frozen and ndim >= 2 and \
                            abs(a - b) <= RELATIVE_CHANGE * max(abs(a), abs(b), 1e-12):
                        self.reason = (f"{worker}: trainable parameter {name} never changed over "
                                       f"{last['optimizer_steps'] - first['optimizer_steps']} optimizer steps "
                                       f"(steps {first['step']} to {last['step']})")
                        return True
        return verdict
