"""`python -m detection [--only RUN ...] [--no-held-out] [--seeds N] [--markdown PATH] [--json PATH]
[--workdir DIR]`: train every scenario (tensor runs, profiled runs, recorded profiler streams, and
every scenario again with the held-out seeds), evaluate every rule on every run, write the matrix.
Exit status 1 when an expected cell is wrong (a target rule silent, a rule firing on a healthy run,
an Error) or a rule's false alarms on held-out healthy runs exceed the budget, 2 when rules are
missing (and nothing else is wrong), 0 otherwise."""
from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from detection.fingerprint import fingerprint
from detection.matrix import Results, run_matrix
from detection.profiler_matrix import PROFILER_SCENARIOS, ProfilerScenario, held_out_profiler, run_profiler
from detection.report import write
from detection.scenarios import HELD_OUT_SEEDS, SCENARIOS, Scenario, held_out, seed_sweep

ROOT = Path(__file__).resolve().parent.parent


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m detection", description=__doc__)
    p.add_argument("--markdown", type=Path, default=ROOT / "docs" / "detection-matrix.md")
    p.add_argument("--json", type=Path, default=ROOT / "detection" / "results.json")
    p.add_argument("--workdir", type=Path, default=None, help="keep the trials here (default: a temporary folder)")
    p.add_argument("--only", nargs="*", default=None, help="run only these scenarios (names)")
    p.add_argument("--seeds", type=int, default=0, metavar="N",
                   help="also train each healthy run with N other seeds: reported, not judged")
    p.add_argument("--no-held-out", action="store_true",
                   help=f"leave out the runs with the held-out seeds {', '.join(map(str, HELD_OUT_SEEDS))}")
    p.add_argument("-q", "--quiet", action="store_true")
    args = p.parse_args(argv)
    known = {s.name for s in SCENARIOS} | {s.name for s in PROFILER_SCENARIOS}
    unknown = sorted(set(args.only or ()) - known)
    if unknown:
        p.error(f"unknown scenario(s): {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    scenarios = [s for s in SCENARIOS if not args.only or s.name in args.only]
    profiler = [s for s in PROFILER_SCENARIOS if not args.only or s.name in args.only]
    if not args.no_held_out:
        scenarios += [s for s in held_out() if not args.only or s.name.split("@")[0] in args.only]
        profiler += [s for s in held_out_profiler(HELD_OUT_SEEDS) if not args.only or s.name.split("@")[0] in args.only]
    for s in list(scenarios):  # a comparison partner must run too
        if s.compare_with and all(x.name != s.compare_with for x in scenarios):
            partner = next(x for x in (*SCENARIOS, *held_out()) if x.name == s.compare_with)
            scenarios.insert(scenarios.index(s), partner)
    scenarios += list(seed_sweep(range(100, 100 + args.seeds)))
    log = (lambda _m: None) if args.quiet else (lambda m: print(m, file=sys.stderr, flush=True))
    if args.workdir is not None:
        results = run_all(args.workdir, scenarios, profiler, log)
    else:
        with tempfile.TemporaryDirectory(prefix="sdlocal-detection-") as tmp:
            results = run_all(Path(tmp), scenarios, profiler, log)
    results.complete = not args.only and not args.no_held_out
    write(results, args.markdown, args.json)
    wrong = results.wrong()
    over = results.over_budget()
    print(f"{len(results.cells)} cells, {len(wrong)} wrong; false alarms over budget: "
          f"{', '.join(f'{r} {f} of {n}' for r, (f, n) in over.items()) or 'none'}; "
          f"missing rules: {', '.join(results.missing) or 'none'}; matrix: {args.markdown}")
    if wrong or over:
        return 1
    return 2 if results.missing else 0


def run_all(workdir: Path, scenarios: Sequence[Scenario], profiler: Sequence[ProfilerScenario],
            log: Callable[[str], None] = lambda _m: None) -> Results:
    """The tensor matrix, then the profiler rules' runs, into one Results stamped with the
    fingerprint of the sources that produced it."""
    results = run_matrix(workdir, scenarios, log=log)
    run_profiler(workdir, results, profiler, log=log)
    results.fingerprint = fingerprint()
    return results


if __name__ == "__main__":
    raise SystemExit(main())
