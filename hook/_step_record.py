"""What the hook tells the launcher about the steps it saw: `.sdlocal-steps.json` in its output
folder, written when it closes.

The trial says which steps were saved, not how many the training ran: a collection saved every 500
steps in a 50-step job leaves one step in the trial and nothing to tell that 49 were skipped. The
launcher reads this record after the training to warn when a rule's collections were scheduled at
fewer than 2 steps (launcher/job/steps_to_judge.py). Not part of smdebug's trial format: the uploader
leaves it out, readers never see it (a dot file at the trial's root, beside the end marker).

    {"steps": 50, "mode_steps": {"TRAIN": 40, "EVAL": 10},
     "scheduled_steps": {"gradients": 1, "losses": 50}}

`scheduled_steps`: for each collection, the steps at which its save schedule (save_interval,
save_steps, start/end step, per mode) had it saved, whether or not any tensor matched.
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
        self.carried: Counter[str] = Counter()  # counts of a hook this one took over from

    def step(self, active_mask: int) -> None:
        self.masks[active_mask] += 1

    def scheduled(self, names: Iterable[str]) -> dict[str, int]:
        """Steps per collection; `names` are the collections in bit order (bit i = names[i])."""
        counts: Counter[str] = Counter(self.carried)
        ordered = list(names)
        for mask, steps in self.masks.items():
            for bit, name in enumerate(ordered):
                if mask & (1 << bit):
                    counts[name] += steps
        for name in ordered:
            counts.setdefault(name, 0)
        return dict(counts)


def write_record(out_dir: Path, steps: int, mode_steps: Mapping[str, int], scheduled: Mapping[str, int]) -> None:
    """Written atomically (a reader never sees half of it); an OSError propagates to the caller."""
    out_dir.mkdir(parents=True, exist_ok=True)
    body = json.dumps({"steps": steps, "mode_steps": dict(mode_steps), "scheduled_steps": dict(scheduled)},
                      sort_keys=True)
    tmp = out_dir / f"{RECORD_NAME}.{os.getpid()}.tmp"  # the workers of a host share the folder
    tmp.write_text(body)
    os.replace(tmp, out_dir / RECORD_NAME)
