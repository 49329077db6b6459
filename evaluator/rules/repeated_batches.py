"""RepeatedBatches: the same input batch again within one pass over the data, or on two workers."""
from __future__ import annotations

from typing import Any

from sdlocal.evaluator.params import parse_int
from sdlocal.evaluator.rules._records import Line, RecordRule


class RepeatedBatches(RecordRule):
    """Fires when identical training batches (the hook's fingerprint of the model's first input
    at every training step, CPU inputs) come back at least `min_repeats` times: on one worker, a
    batch seen again sooner than the data could have cycled (fewer steps since it was seen than
    distinct batches so far: data loader workers repeating each other's random augmentation, the
    NumPy seed every forked worker inherits), or on two workers at the same step (replicas fed
    the same data: no DistributedSampler). A dataset replayed in the same order each epoch repeats
    only after a whole pass and does not fire.
    """

    group = "beyond Debugger"

    def __init__(self, base_trial: Any, min_repeats: object = 2, action_str: str = "") -> None:
        super().__init__(base_trial, action_str=action_str)
        self.min_repeats = int(parse_int(self.rule_name, "min_repeats", min_repeats, minimum=1))  # type: ignore[arg-type]
        self._fingerprints: dict[str, dict[str, int]] = {}  # worker -> fingerprint -> index of its last sighting
        self._batch_count: dict[str, int] = {}
        self._by_step: dict[int, dict[str, str]] = {}
        self.repeats = 0

    def judge_records(self, lines: list[Line], final: bool) -> bool | None:
        verdict: bool | None = None
        for worker, line in lines:
            for step, fp in line.get("batches") or ():
                verdict = False
                seen = self._fingerprints.setdefault(worker, {})
                index = self._batch_count.get(worker, 0)
                self._batch_count[worker] = index + 1
                last = seen.get(fp)
                if last is not None and index - last < len(seen):
                    self.repeats += 1
                    self.reason = (f"{worker}: the batch of step {step} already came {index - last} training "
                                   f"steps before, within one pass over {len(seen)} distinct batches")
                seen[fp] = index
                others = self._by_step.setdefault(int(step), {})
                twin = next((w for w, f in others.items() if f == fp and w != worker), None)
                if twin is not None:
                    self.repeats += 1
                    self.reason = f"{worker} and {twin} trained on the same batch at step {step}"
                others[worker] = fp
                if self.repeats >= self.min_repeats:
                    return True
        return verdict
