"""The committed detection results must describe the current rules and scenarios (fast: no
training; reads detection/results.json and docs/detection-matrix.md)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from detection.fingerprint import ROOT, SOURCES, fingerprint, source_files

RESULTS = ROOT / "detection" / "results.json"
MATRIX = ROOT / "docs" / "detection-matrix.md"
REGENERATE = "the committed detection results are older than the rules they describe: run `python -m detection`"


def test_committed_results_match_the_sources() -> None:
    data = json.loads(RESULTS.read_text())
    assert data.get("fingerprint") == fingerprint(), REGENERATE
    assert f"Sources fingerprint: `{data['fingerprint']}`" in MATRIX.read_text(), (
        "docs/detection-matrix.md and detection/results.json are from different runs: run `python -m detection`")


def test_committed_results_are_a_whole_run() -> None:
    data = json.loads(RESULTS.read_text())
    assert data.get("complete") is True, "the committed results come from `--only` or `--no-held-out`: " + REGENERATE


def test_fingerprint_covers_the_rules_and_the_suite() -> None:
    files = {p.relative_to(ROOT).as_posix() for p in source_files()}
    assert "evaluator/rules/overfit.py" in files
    assert "evaluator/profiler_rules/step_outlier.py" in files
    assert "detection/scenarios.py" in files
    assert not any("__pycache__" in f for f in files)


def test_fingerprint_changes_with_any_source(tmp_path: Path) -> None:
    for entry in SOURCES:
        src = ROOT / entry
        if src.is_dir():
            shutil.copytree(src, tmp_path / entry, ignore=shutil.ignore_patterns("__pycache__", "*.json"))
        else:
            (tmp_path / entry).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, tmp_path / entry)
    before = fingerprint(tmp_path)
    assert before == fingerprint()  # the copy hashes as the tree does (results.json is not a source)
    rule = tmp_path / "evaluator" / "rules" / "overfit.py"
    rule.write_text(rule.read_text() + "\n# a change\n")
    changed = fingerprint(tmp_path)
    assert changed != before
    rule.write_bytes(rule.read_bytes().replace(b"\n", b"\r\n"))  # line endings alone do not count
    assert fingerprint(tmp_path) == changed
