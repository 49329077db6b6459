"""What the committed detection results describe: a hash of the sources that decide them.

The committed results (detection/results.json, docs/detection-matrix.md) are only true of the
rules and the scenarios they were produced with. `fingerprint()` hashes those sources (the built-in
rules, the profiler rules, the rule base classes, and the detection package itself); the results
record it, and a fast test fails when the sources changed since (tests/detection/test_staleness.py).
"""
from __future__ import annotations

import hashlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Folders (every *.py under them) and files whose content decides what the matrix shows.
SOURCES: tuple[str, ...] = (
    "evaluator/rules",
    "evaluator/profiler_rules",
    "evaluator/rule.py",
    "evaluator/profiler_rule.py",
    "detection",
)

# Suites with results of their own (detection/realworld: docs/detection-realworld.md).
OWN_RESULTS = ("detection/realworld/",)


def source_files(root: Path = ROOT) -> list[Path]:
    """The files hashed, sorted by their path relative to `root` (so the hash does not depend on
    the order a file system lists them in)."""
    files: list[Path] = []
    for entry in SOURCES:
        path = root / entry
        if path.is_dir():
            files += [p for p in path.rglob("*.py") if "__pycache__" not in p.parts
                      and not p.relative_to(root).as_posix().startswith(OWN_RESULTS)]
        elif path.is_file():
            files.append(path)
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def fingerprint(root: Path = ROOT) -> str:
    """sha256 over each source's relative path and content (line endings normalized)."""
    digest = hashlib.sha256()
    for path in source_files(root):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes().replace(b"\r\n", b"\n"))
        digest.update(b"\0")
    return digest.hexdigest()
