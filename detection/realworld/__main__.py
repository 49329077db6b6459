"""`python -m detection.realworld`: run every case, write docs/detection-realworld.md and
detection/realworld/results.json."""
from __future__ import annotations

from pathlib import Path

from detection.realworld.report import render
from detection.realworld.run import run_all, write_json

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    results = run_all()
    write_json(results, Path(__file__).with_name("results.json"))
    (ROOT / "docs" / "detection-realworld.md").write_text(render(results))
    for r in results:
        print(r["case"], r["variant"], {k: v for k, v in r["verdicts"].items() if v != "NoIssuesFound"})


if __name__ == "__main__":
    main()
