"""What the hook tells the launcher about the steps it saw: `.sdlocal-steps.json` in its output
folder, written when it closes.

The trial says which steps were saved, not how many the training ran: a collection saved every 500
steps in a 50-step job leaves one step in the trial and nothing to tell that 49 were skipped. The
launcher reads this record after the training to warn when a rule's collections were scheduled at
fewer than 2 steps (launcher/job/steps_to_judge.py). Not part of smdebug's trial format: the uploader
leaves it out, readers never see it (a dot file at the trial's root, beside the end marker).

    {"steps": 50, "mode_steps": {"TRAIN": 40, "EVAL": 10},
     "scheduled_steps": {"gradients": 1, "losses": 50}, "saved_steps": {"gradients": 1, "losses": 0}}

`scheduled_steps`: for each collection, the steps at which its save schedule (save_interval,
save_steps, start/end step, per mode) had it saved, whether or not any tensor matched.
`saved_steps` (the PyTorch hook's): the steps at which at least one tensor of the collection was
saved: `losses` 0 of 50 scheduled when the training never gave the hook its loss.
"""
from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path

RECORD_NAME = ".sdlocal-steps.json"


class StepRecord:
    """Counts the steps and, per collection, the steps it was scheduled at; cheap per step (one
    Counter update of the step's collection bit mask)."""

    def __init__(self) -> None:
        self.masks: Counter[int] = Counter()  # the step's active collection bits -> steps
        self.saved_masks: Counter[int] = Counter()  # the bits of the collections a step saved tensors of -> steps
        self.carried: Counter[str] = Counter()  # counts of a hook this one took over from
        self.carried_saved: Counter[str] = Counter()

    def step(self, active_mask: int) -> None:
        self.masks[active_mask] += 1

    def saved(self, saved_mask: int) -> None:
        self.saved_masks[saved_mask] += 1

    def scheduled(self, names: Iterable[str]) -> dict[str, int]:
        """Steps per collection; `names` are the collections in bit order (bit i = names[i])."""
        return _per_collection(self.masks, self.carried, names)

    def saved_steps(self, names: Iterable[str]) -> dict[str, int]:
        """Steps that saved a tensor, per collection (bit order as in `scheduled`)."""
        return _per_collection(self.saved_masks, self.carried_saved, names)


def _per_collection(masks: Counter[int], carried: Counter[str], names: Iterable[str]) -> dict[str, int]:
    counts: Counter[str] = Counter(carried)
    ordered = list(names)
    for mask, steps in masks.items():
        for bit, name in enumerate(ordered):
            if mask & (1 << bit):
                counts[name] += steps
    for name in ordered:
        counts.setdefault(name, 0)
    return dict(counts)


def write_record(out_dir: Path, steps: int, mode_steps: Mapping[str, int], scheduled: Mapping[str, int],
                 saved: Mapping[str, int] | None = None) -> None:
    """Written atomically (a reader never sees half of it); an OSError propagates to the caller."""
    out_dir.mkdir(parents=True, exist_ok=True)
    record: dict[str, object] = {"steps": steps, "mode_steps": dict(mode_steps), "scheduled_steps": dict(scheduled)}
    if saved is not None:
        record["saved_steps"] = dict(saved)
    body = json.dumps(record, sort_keys=True)
    tmp = out_dir / f"{RECORD_NAME}.{os.getpid()}.tmp"  # the workers of a host share the folder
    tmp.write_text(body)
    os.replace(tmp, out_dir / RECORD_NAME)
