"""Small real trials for evaluator tests, written with trial.TrialWriter."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from sdlocal.trial import Collection, TrialWriter, create_trial
from sdlocal.trial.trial import Trial

COLLECTIONS = (
    Collection("weights", include_regex=("^(?!gradient).*weight",)),
    Collection("biases", include_regex=("^(?!gradient).*bias",)),
    Collection("gradients", include_regex=("^gradient",)),
    Collection("losses", include_regex=("[Ll]oss_(?!input).*output",)),
)

StepSpec = tuple[int, str, int, Mapping[str, object]]  # (global step, mode, mode step, tensors)


def write_steps(root: Path, steps: Iterable[StepSpec], *, end: bool = True, collections: bool = True) -> Path:
    writer = TrialWriter(root)
    if collections:
        writer.write_collections(COLLECTIONS)
    for step, mode, mode_step, tensors in steps:
        writer.write_step(step, mode, mode_step, [(n, np.asarray(v)) for n, v in tensors.items()])
    if end:
        writer.write_end_marker()
    return root


def train_steps(tensors_per_step: Iterable[Mapping[str, object]], start: int = 0) -> list[StepSpec]:
    return [(start + i, "TRAIN", start + i, t) for i, t in enumerate(tensors_per_step)]


def make_trial(root: Path, steps: Iterable[StepSpec], **kwargs: bool) -> Trial:
    return create_trial(str(write_steps(root, steps, **kwargs)))


def losses(values: Iterable[float], steps: Iterable[int] | None = None) -> list[StepSpec]:
    vals = list(values)
    idx = list(steps) if steps is not None else list(range(len(vals)))
    return [(s, "TRAIN", s, {"CrossEntropyLoss_output_0": np.float32(v)}) for s, v in zip(idx, vals, strict=True)]


class Clock:
    """A fake clock for the evaluator loop: a test's `sleep` advances `now`."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def judged_nothing(status: object) -> bool:
    """The rule ended Error saying it judged nothing: none of its tensors was saved (evaluator/unjudged.py)."""
    from sdlocal.evaluator.status import Status

    return getattr(status, "status", None) is Status.ERROR and " judged nothing: " in getattr(status, "status_details", "")
