"""`python -m sdlocal.launcher.serve`: the detached endpoint `sdlocal serve --background` starts."""
from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path

from sdlocal.launcher.job.run import stop_on_signals
from sdlocal.launcher.serve.control import serve_foreground
from sdlocal.launcher.settings import sdlocal_home


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sdlocal.launcher.serve")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--runtime", default="auto")
    parser.add_argument("--ready-file", type=Path, required=True)
    parser.add_argument("--host-cpus")
    parser.add_argument("--host-memory")
    parser.add_argument("--max-concurrent-jobs", type=int)
    args = parser.parse_args(argv)

    def echo(line: str) -> None:
        print(line, flush=True)

    stop = threading.Event()
    with stop_on_signals(stop):
        stuck = serve_foreground(sdlocal_home(), port=args.port, runtime=args.runtime, echo=echo, stop=stop,
                                 ready=lambda url: args.ready_file.write_text(url), host_cpus=args.host_cpus,
                                 host_memory=args.host_memory, max_concurrent_jobs=args.max_concurrent_jobs)
    if stuck:
        print(f"jobs still running at exit: {', '.join(stuck)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
