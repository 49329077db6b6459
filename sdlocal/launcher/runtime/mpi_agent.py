"""`python -m sdlocal.launcher.runtime.mpi_agent HOST COMMAND...`: mpirun's remote shell for the hosts
of a job on this machine (launcher/runtime/mpi.py). Where ssh would log in to HOST and run COMMAND
(Open MPI's daemon) in a shell, this runs it here in HOST's environment, its output appended to
HOST's training log (the first host's goes to mpirun's, which is that log already)."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from sdlocal.launcher.runtime.mpi import HOSTS_ENV


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python -m sdlocal.launcher.runtime.mpi_agent HOST COMMAND...", file=sys.stderr)
        return 2
    host, command = argv[0], argv[1:]
    folder = os.environ.get(HOSTS_ENV)
    try:
        if not folder:
            raise OSError(f"{HOSTS_ENV} is not set")
        data = json.loads((Path(folder) / f"{host}.json").read_text())
    except (OSError, ValueError) as e:
        print(f"sdlocal mpi agent: no environment for host {host}: {e}", file=sys.stderr)
        return 255  # what ssh answers when it cannot reach the host
    if not data.get("master"):
        log = os.open(data["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        print(f"sdlocal: {host} runs Open MPI's daemon for mpirun on algo-1 (its ranks' output is in algo-1's log)",
              flush=True)
    sys.stdout.flush()
    os.execve("/bin/sh", ["/bin/sh", "-c", " ".join(command)], dict(data["env"]))
    return 0  # not reached


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
