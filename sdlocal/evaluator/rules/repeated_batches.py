"""RepeatedBatches: the same input batch again within one pass over the data, or on two workers."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sdlocal.evaluator.params import parse_int
from sdlocal.evaluator.rules._records import Line, RecordRule


def full_iteration(before: Sequence[int] | None, after: Sequence[int] | None) -> bool:
    """Whether the training went through a whole iteration between two sightings of a batch, from
    each optimizer's step count at each: every optimizer stepped, or one of them twice. Without
    counts (an older hook's records) every repeat counts."""
    if before is None or after is None:
        return True
    gains = [a - (before[i] if i < len(before) else 0) for i, a in enumerate(after)]
    return bool(gains) and (max(gains) >= 2 or min(gains) >= 1)


class RepeatedBatches(RecordRule):
    """Fires when identical training batches (the hook's fingerprint of the model's first input
    at every training step, CPU inputs) come back at least `min_repeats` times: on one worker, a
    batch seen again sooner than the data could have cycled (fewer steps since it was seen than
    distinct batches so far: data loader workers repeating each other's random augmentation, the
    NumPy seed every forked worker inherits), or on two workers at the same step (replicas fed
    the same data: no DistributedSampler). A dataset replayed in the same order each epoch repeats
    only after a whole pass and does not fire.

    Repeats across iterations only: a batch used again before the training went through a whole
    iteration (every optimizer stepped, or one of them twice, per the optimizers' step counts the
    hook records with each batch) is one iteration's batch used twice, e.g. a GAN's fake batch,
    given to the discriminator detached for its own step and again for the generator's. Sightings
    before any optimizer stepped twice are not judged on one worker (the training's optimizers are
    not all known yet).
    """

    group = "beyond Debugger"

    def __init__(self, base_trial: Any, min_repeats: object = 2, action_str: str = "") -> None:
        super().__init__(base_trial, action_str=action_str)
        self.min_repeats = int(parse_int(self.rule_name, "min_repeats", min_repeats, minimum=1))  # type: ignore[arg-type]
        # worker -> fingerprint -> (index of its last sighting, the optimizers' step counts then)
        self._fingerprints: dict[str, dict[str, tuple[int, list[int] | None]]] = {}
        self._batch_count: dict[str, int] = {}
        self._by_step: dict[int, dict[str, str]] = {}
        self.repeats = 0

    def judge_records(self, lines: list[Line], final: bool) -> bool | None:
        verdict: bool | None = None
        for worker, line in lines:
            for entry in line.get("batches") or ():
                step, fp = entry[0], entry[1]
                counts = list(entry[2]) if len(entry) > 2 else None
                verdict = False
                seen = self._fingerprints.setdefault(worker, {})
                index = self._batch_count.get(worker, 0)
                self._batch_count[worker] = index + 1
                last = seen.get(fp)
                if last is not None and index - last[0] < len(seen) and self._judged(last[1], counts):
                    self.repeats += 1
                    self.reason = (f"{worker}: the batch of step {step} already came {index - last[0]} training "
                                   f"steps before, within one pass over {len(seen)} distinct batches")
                seen[fp] = (index, counts)
                others = self._by_step.setdefault(int(step), {})
                twin = next((w for w, f in others.items() if f == fp and w != worker), None)
                if twin is not None:
                    self.repeats += 1
                    self.reason = f"{worker} and {twin} trained on the same batch at step {step}"
                others[worker] = fp
                if self.repeats >= self.min_repeats:
                    return True
        return verdict

    def missing_data(self) -> str | None:
        """Records without a single batch fingerprint judged nothing (inputs on a GPU, or not tensors)."""
        missing = super().missing_data()
        if missing is None and not self._batch_count:
            return ("the training records hold no batch fingerprint (they are taken of the model's first tensor "
                    "input, on the CPU only)")
        return missing

    @staticmethod
    def _judged(before: list[int] | None, after: list[int] | None) -> bool:
        """A repeat on one worker counts when the first sighting came after some optimizer's second
        step and a whole iteration passed since."""
        if before is not None and max(before, default=0) < 2:
            return False
        return full_iteration(before, after)
