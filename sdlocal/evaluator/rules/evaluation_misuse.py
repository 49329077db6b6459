"""EvaluationMisuse: evaluations run in training mode, modules first built by an evaluation."""
from __future__ import annotations

from typing import Any

from sdlocal.evaluator.params import parse_int
from sdlocal.evaluator.rules._records import Line, RecordRule


class EvaluationMisuse(RecordRule):
    """Fires when the model is evaluated in training mode or a module is built by an evaluation:
    at least `min_forwards` forwards without autograd (or in the EVAL mode of `hook.set_mode`) of a
    model with dropout or batch norm still in training mode, each following another such forward
    with no optimizer step between them (an evaluation pass missing `model.eval()`: dropout
    active, batch statistics from evaluation data; a single no-grad forward per training step, as
    a GAN's generator makes, is not one); or parameters registered on the model during an
    evaluation after training began (a lazily built module first run by an evaluation: made after
    the optimizer, which never trains it).
    """

    group = "beyond Debugger"

    def __init__(self, base_trial: Any, min_forwards: object = 1, action_str: str = "") -> None:
        super().__init__(base_trial, action_str=action_str)
        self.min_forwards = int(parse_int(self.rule_name, "min_forwards", min_forwards, minimum=1))  # type: ignore[arg-type]

    def judge_records(self, lines: list[Line], final: bool) -> bool | None:
        verdict: bool | None = None
        for worker, line in lines:
            kind = line.get("kind")
            if kind == "layout":
                if line.get("new_in_eval"):
                    self.reason = (f"{worker}: {', '.join(line['new_in_eval'][:3])} registered during an evaluation "
                                   f"(a module built lazily by its first forward, run in evaluation)")
                    return True
                continue
            if kind not in ("step", "final"):
                continue
            count = int(line.get("eval_train_forwards", 0))
            if count >= self.min_forwards:
                self.reason = (f"{worker}: {count} evaluation forwards (no autograd) ran with the model in "
                               f"training mode (dropout/batch norm active), up to step {line['step']}")
                return True
            verdict = False
        return verdict
