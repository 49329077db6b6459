"""Proof that a hooked run really wrote what it was asked to: the steps due at its save interval,
each with the same tensors, read straight from the index files (no reader of ours involved)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.errors import BenchmarkError

LAYERS = ("fc1", "fc2", "fc3")  # workers/_model.py's Net
EXPECTED_TENSORS = frozenset(
    [f"Net_{layer}.{kind}" for layer in LAYERS for kind in ("weight", "bias")]
    + [f"gradient/Net_{layer}.{kind}" for layer in LAYERS for kind in ("weight", "bias")]
    + ["CrossEntropyLoss_output_0"]
)


def expected_steps(total_steps: int, interval: int) -> list[int]:
    """Global steps saved by `save_interval=interval` over steps 0..total_steps-1."""
    return [step for step in range(total_steps) if step % interval == 0]


def saved_tensors(trial_dir: Path) -> dict[int, frozenset[str]]:
    """Global step -> tensor names, from every `index/*/*.json` of a local single-worker trial."""
    saved: dict[int, frozenset[str]] = {}
    for index_file in sorted((trial_dir / "index").glob("*/*.json")):
        step = int(index_file.name.split("_", 1)[0])
        payload = json.loads(index_file.read_text())
        names = frozenset(entry["tensorname"] for entry in payload["tensor_payload"])
        events = trial_dir / payload["meta"]["event_file_name"]
        if not events.is_file():
            raise BenchmarkError(f"{index_file} points to a missing events file {events}")
        saved[step] = names
    return saved


def check_trial(trial_dir: Path, total_steps: int, interval: int) -> dict[str, int]:
    """Raises BenchmarkError unless the trial holds exactly the due steps, each with
    EXPECTED_TENSORS; returns counts for the results file."""
    saved = saved_tensors(trial_dir)
    due = expected_steps(total_steps, interval)
    if sorted(saved) != due:
        missing = sorted(set(due) - set(saved))
        extra = sorted(set(saved) - set(due))
        raise BenchmarkError(
            f"{trial_dir}: expected {len(due)} saved steps at interval {interval}, found {len(saved)}"
            f" (missing {missing[:5]}, unexpected {extra[:5]})"
        )
    for step, names in saved.items():
        if names != EXPECTED_TENSORS:
            raise BenchmarkError(
                f"{trial_dir}: step {step} saved {sorted(names)}; expected {sorted(EXPECTED_TENSORS)}"
                f" (missing {sorted(EXPECTED_TENSORS - names)}, extra {sorted(names - EXPECTED_TENSORS)})"
            )
    if not list((trial_dir / "collections").glob("*/*_collections.json")):
        raise BenchmarkError(f"{trial_dir}: no collections file was written")
    return {"saved_steps": len(saved), "tensors_per_step": len(EXPECTED_TENSORS)}
