"""`--runtime docker|process|auto`: which runtime runs a job, decided before anything starts."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sdlocal.launcher.errors import RuntimeLaunchError
from sdlocal.launcher.runtime.base import Runtime
from sdlocal.launcher.runtime.docker_config import ContainerUser, HostLimits, RuleLimits
from sdlocal.launcher.runtime.process import ProcessRuntime

RUNTIMES = ("process", "docker", "auto")


def _docker_client() -> Any:
    import docker

    client = docker.from_env(timeout=60)
    try:
        client.ping()
    except BaseException:
        client.close()
        raise
    return client


def select_runtime(
    kind: str,
    *,
    rule_images: Sequence[str | None],
    training_image: str | None,
    limits: RuleLimits | None = None,
    keep: bool = False,
    training_user: ContainerUser | None = None,
    echo: Callable[[str], None] = print,
    docker_client: Callable[[], Any] = _docker_client,
    host_limits: HostLimits | None = None,
    distribution: str = "none",
) -> Runtime:
    """The runtime for a job whose rules ask for `rule_images` and training for `training_image`.

    docker: an engine must answer and every image must exist (else one line naming the command
    that builds it); auto: docker when both hold, else process, saying which and why.
    `host_limits` (--host-cpus, --host-memory) need containers: refused for the process runtime."""
    if kind not in RUNTIMES:
        raise RuntimeLaunchError(f"--runtime: {kind!r} is not one of {', '.join(RUNTIMES)}")

    def process(why: str | None = None) -> ProcessRuntime:
        if host_limits is not None:
            raise RuntimeLaunchError("--host-cpus/--host-memory: the process runtime cannot limit a host's CPUs or "
                                     "memory (its hosts are process groups of this machine); run the job with "
                                     "--runtime docker" + (f" ({why})" if why else ""))
        if why:
            echo(f"Runtime: process ({why})")
        return ProcessRuntime()

    check_distribution(distribution, kind)
    if kind == "process":
        return process()
    if distribution == "mpi":  # auto: mpirun runs on this machine
        return process("distribution mpi: Open MPI's mpirun on this machine")
    from sdlocal.launcher.images import build as images
    from sdlocal.launcher.runtime.docker import DockerRuntime

    try:
        client = docker_client()
    except Exception as e:  # noqa: BLE001 - any failure means "no engine answers"
        why = f"no Docker engine answers ({' '.join(str(e).split())[:200]})"
        if kind == "docker":
            raise RuntimeLaunchError(f"--runtime docker: {why}") from e
        return process(why)
    runtime = DockerRuntime(client, training_image=images.training_image(), evaluator_image=images.evaluator_image(),
                            limits=limits, keep=keep, training_user=training_user, echo=echo, host_limits=host_limits)
    missing = runtime.missing_images(list(rule_images), training_image)
    if missing:
        client.close()
        ours = [m for m in missing if m in (runtime.training_image, runtime.evaluator_image)]
        theirs = [m for m in missing if m not in ours]
        why = images.missing_image_message(", ".join(ours)) if ours else (
            f"RuleEvaluatorImage {', '.join(theirs)} not found in the local Docker engine: build or load it first")
        if kind == "docker":
            raise RuntimeLaunchError(why)
        return process(why)
    echo(f"Runtime: docker ({runtime.training_image}, {runtime.evaluator_image})"
         if kind == "auto" else f"Runtime: docker (network sdlocal-*-{runtime.run_id})")
    return runtime


def check_distribution(distribution: str, kind: str) -> None:
    """Refuse, before anything starts (serve: at CreateTrainingJob), a distribution the runtime
    `kind` cannot launch: mpi needs mpirun on this machine and the process runtime."""
    if distribution != "mpi":
        return
    from sdlocal.launcher.runtime import mpi

    if kind == "docker":
        raise RuntimeLaunchError(mpi.DOCKER_NO_MPI)
    mpi.require_mpirun()
