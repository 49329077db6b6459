"""`python -m detection [--only RUN ...] [--seeds N] [--markdown PATH] [--json PATH] [--workdir DIR]`:
train every scenario, evaluate every rule on every run, write the matrix. Exit status 1 when an
expected cell is wrong (a target rule silent, a rule firing on a healthy run, an Error), 2 when
rules are missing (and nothing is wrong), 0 otherwise."""
from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from detection.matrix import run_matrix
from detection.report import write
from detection.scenarios import SCENARIOS, seed_sweep

ROOT = Path(__file__).resolve().parent.parent


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m detection", description=__doc__)
    p.add_argument("--markdown", type=Path, default=ROOT / "docs" / "detection-matrix.md")
    p.add_argument("--json", type=Path, default=ROOT / "detection" / "results.json")
    p.add_argument("--workdir", type=Path, default=None, help="keep the trials here (default: a temporary folder)")
    p.add_argument("--only", nargs="*", default=None, help="run only these scenarios (names)")
    p.add_argument("--seeds", type=int, default=0, metavar="N",
                   help="also train each healthy run with N other seeds: reported, not judged")
    p.add_argument("-q", "--quiet", action="store_true")
    args = p.parse_args(argv)
    known = {s.name for s in SCENARIOS}
    unknown = sorted(set(args.only or ()) - known)
    if unknown:
        p.error(f"unknown scenario(s): {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    scenarios = [s for s in SCENARIOS if not args.only or s.name in args.only]
    for s in list(scenarios):  # a comparison partner must run too
        if s.compare_with and all(x.name != s.compare_with for x in scenarios):
            scenarios.insert(0, next(x for x in SCENARIOS if x.name == s.compare_with))
    scenarios += list(seed_sweep(range(100, 100 + args.seeds)))
    log = (lambda _m: None) if args.quiet else (lambda m: print(m, file=sys.stderr, flush=True))
    if args.workdir is not None:
        results = run_matrix(args.workdir, scenarios, log=log)
    else:
        with tempfile.TemporaryDirectory(prefix="sdlocal-detection-") as tmp:
            results = run_matrix(Path(tmp), scenarios, log=log)
    write(results, args.markdown, args.json)
    wrong = results.wrong()
    print(f"{len(results.cells)} cells, {len(wrong)} wrong; missing rules: {', '.join(results.missing) or 'none'}; "
          f"matrix: {args.markdown}")
    if wrong:
        return 1
    return 2 if results.missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
