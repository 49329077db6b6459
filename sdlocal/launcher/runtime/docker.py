"""`DockerRuntime`: the training container and one evaluator container per rule, on a per-job
internal network whose only way out is an S3 gateway container.

    evaluator ─┐ job network (internal) ┌ s3-gateway ─ default bridge ─ host relay (docker0 IP) ─ S3 endpoint
    training  ─┘                        └ (relay)

The training container sits on the job network only: it reaches S3 through the gateway and
nothing else (not the host, not the internet; with AWS's own S3 the job network is not internal:
the containers need the internet to reach it). With EnableNetworkIsolation it has no network at
all and no S3 credentials: the launcher stages its inputs and uploads its outputs, as SageMaker's
platform does. It runs as a non-root user (`--training-user`, `training_user()`): the one running
sdlocal, or uid 1000 when that is root, whose writable folders (output/, model/) are then given
to it; an input it could not read is one line before anything starts.

A job of several hosts runs one training container per host (`algo-1` .. `algo-N`: its hostname
and its alias on the job network, so every host reaches the others by name, rank 0 at algo-1:7777
as on SageMaker), each with its own /opt/ml (the host's folders of the job) and, when asked
(`HostLimits`: --host-cpus, --host-memory), its own CPU and memory limits. With EnableNetworkIsolation
they share a network of their own that reaches nothing else.

Every container and the network carry `sdlocal.job`, `sdlocal.run` and `sdlocal.role` labels
(`sdlocal.rule` for evaluators); `close()` removes this run's containers and network unless `keep`.
Container output is copied, as it comes, into the job's log files (`sdlocal logs` works after removal).
"""
from __future__ import annotations

import contextlib
import ipaddress
import math
import os
import threading
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sdlocal.launcher.errors import RuntimeLaunchError
from sdlocal.launcher.runtime import relay as _relay
from sdlocal.launcher.runtime.base import Rendezvous, RuleLaunch, Runtime, TrainingLaunch
from sdlocal.launcher.runtime.docker_config import (
    CODE_DIR,
    GATEWAY_PORT,
    OPT_ML,
    ContainerUser,
    Endpoint,
    HostLimits,
    RuleLimits,
    container_name,
    host_resources,
    map_env,
    own_writable_mounts,
    rule_image,
    training_image,
    training_mounts,
    training_user,
    unreadable_input,
    write_container_config,
)
from sdlocal.launcher.runtime.docker_handle import DockerHandle, docker_errors
from sdlocal.launcher.settings import LABEL_HOST, LABEL_JOB, LABEL_ROLE, LABEL_RULE, LABEL_RUN

GATEWAY_ALIAS = "sdlocal-s3"
ZERO_CODE_DIR = "/opt/sdlocal-zero-code"  # hook/zero_code/, mounted for a container command
_HARDENING: dict[str, Any] = {
    "read_only": True,
    "tmpfs": {"/tmp": "rw,nosuid,nodev,size=512m"},
    "cap_drop": ["ALL"],
    "security_opt": ["no-new-privileges:true"],
}
_NOBODY = "65534:65534"
_AWS_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION", "AWS_REGION")


class DockerRuntime(Runtime):
    """One job's containers. Create it per job run; call `close()` when the job ended (always)."""

    isolates_network = True

    def __init__(
        self,
        client: Any,
        *,
        training_image: str,
        evaluator_image: str,
        limits: RuleLimits | None = None,
        keep: bool = False,
        training_user: ContainerUser | None = None,
        echo: Callable[[str], None] = print,
        run_id: str | None = None,
        host_limits: HostLimits | None = None,
    ) -> None:
        self.client = client
        self.training_image = training_image
        self.evaluator_image = evaluator_image
        self.limits = limits  # None: each rule's InstanceType, else RuleLimits()
        self.keep = keep
        self.training_user = training_user  # None: default_training_user() when training starts
        self.echo = echo
        self.run_id = run_id or uuid.uuid4().hex[:8]
        self.host_limits = host_limits  # each training container's (None: no limits)
        self.handles: list[DockerHandle] = []
        self._network: Any = None
        self._isolated_network: Any = None  # EnableNetworkIsolation with several hosts: theirs alone
        self._gateway: Any = None
        self._relay: _relay.ThreadRelay | None = None
        self._gateway_url: str | None = None
        self._aws = False  # AWS's own S3: no gateway, the containers need the internet
        self._lock = threading.Lock()

    # -- images ----------------------------------------------------------------------------------
    def image_exists(self, image: str) -> bool:
        from sdlocal.launcher.images.build import image_exists

        return image_exists(image, self.client)

    def missing_images(self, rule_images: list[str | None], training: str | None) -> list[str]:
        """The images this job would run that are not present locally (checked before anything starts)."""
        needed = [training_image(training, self.training_image, self.image_exists)[0]]
        needed += [rule_image(image, self.evaluator_image) for image in rule_images]
        if rule_images:
            needed.append(self.evaluator_image)  # the S3 gateway runs on it
        return [image for image in dict.fromkeys(needed) if not self.image_exists(image)]

    # -- network ---------------------------------------------------------------------------------
    def _labels(self, job: str, role: str, **extra: str) -> dict[str, str]:
        return {LABEL_JOB: job, LABEL_RUN: self.run_id, LABEL_ROLE: role, **extra}

    def _ensure_network(self, job: str, env: dict[str, str]) -> dict[str, str]:
        """The job network and S3 gateway (first call); returns `env` with the endpoint rewritten."""
        with self._lock:
            if self._network is None:
                failures: tuple[type[BaseException], ...] = (OSError, *docker_errors())  # the relay's bind, the engine
                try:
                    self._create_network(job, env.get("AWS_ENDPOINT_URL_S3"))
                except failures as e:
                    raise RuntimeLaunchError(
                        f"cannot start the job network and S3 gateway: {' '.join(str(e).split())}") from e
        env = {**{k: v for k, v in os.environ.items() if k in _AWS_ENV}, **env}  # a process would inherit them
        if self._gateway_url:
            env["AWS_ENDPOINT_URL_S3"] = self._gateway_url
            if "AWS_ACCESS_KEY_ID" not in env:  # credentials from ~/.aws are not in the container
                env.update({"AWS_ACCESS_KEY_ID": "sdlocal", "AWS_SECRET_ACCESS_KEY": "sdlocal"})
        env.setdefault("AWS_DEFAULT_REGION", "us-east-1")
        return env

    def _create_network(self, job: str, endpoint_url: str | None) -> None:
        self._aws = not endpoint_url
        self._network = self.client.networks.create(
            container_name("sdlocal", job, self.run_id), driver="bridge", internal=not self._aws,
            labels=self._labels(job, "network"), check_duplicate=True,
            # no host address on the job's bridge: its containers cannot reach the host's
            # services either (an internal network only stops forwarding, not the host)
            options={"com.docker.network.bridge.inhibit_ipv4": "true"} if not self._aws else {},
        )
        if endpoint_url:
            self._start_gateway(job, Endpoint.parse(endpoint_url))
        else:
            self.echo("S3 is AWS's own: the job's containers get internet access (no S3 gateway)")

    def _bridge_gateway_ip(self) -> str:
        bridge = self.client.networks.get("bridge")
        for cfg in bridge.attrs.get("IPAM", {}).get("Config") or []:
            if cfg.get("Gateway"):
                return str(cfg["Gateway"])
            if cfg.get("Subnet") and ":" not in cfg["Subnet"]:  # the engine gives docker0 the first address
                return str(ipaddress.ip_network(cfg["Subnet"], strict=False).network_address + 1)
        raise RuntimeLaunchError("docker's default bridge network has no gateway address")

    def _start_gateway(self, job: str, endpoint: Endpoint) -> None:
        host_ip = self._bridge_gateway_ip()
        self._relay = _relay.ThreadRelay(host_ip, endpoint.host, endpoint.port)
        source = Path(_relay.__file__).read_text()
        container = self.client.containers.create(
            self.evaluator_image, entrypoint=["python", "-c", source],
            command=["0.0.0.0", str(GATEWAY_PORT), host_ip, str(self._relay.port)],
            name=container_name("sdlocal", job, "s3-gateway", self.run_id),
            labels=self._labels(job, "s3-gateway"), network="bridge", user=_NOBODY,
            mem_limit=128 * 1024**2, nano_cpus=int(0.5e9), pids_limit=64, **_HARDENING,
        )
        self._gateway = container
        self._network.connect(container, aliases=[GATEWAY_ALIAS])
        container.start()
        container.reload()
        ip = container.attrs["NetworkSettings"]["Networks"][self._network.name]["IPAddress"]
        self._gateway_url = endpoint.via(ip)

    # -- containers ------------------------------------------------------------------------------
    def _hosts_network(self, job: str) -> Any:
        """The network of an isolated job's hosts: internal, no gateway, nothing else on it."""
        with self._lock:
            if self._isolated_network is None:
                try:
                    self._isolated_network = self.client.networks.create(
                        container_name("sdlocal", job, "hosts", self.run_id), driver="bridge", internal=True,
                        labels=self._labels(job, "network"), check_duplicate=True,
                        options={"com.docker.network.bridge.inhibit_ipv4": "true"})
                except docker_errors() as e:
                    raise RuntimeLaunchError(f"cannot start the hosts' network: {' '.join(str(e).split())}") from e
            return self._isolated_network

    def _run(self, name: str, log_path: Path, labels: dict[str, str], *, isolated: bool = False,
             aliases: tuple[str, ...] = (), network: Any = None, **kwargs: Any) -> DockerHandle:
        """A container on the job network (`isolated`: on no network at all; `network`: on that
        one), known there also by `aliases`."""
        network = network if network is not None else (None if isolated else self._network)
        where = {"network_mode": "none"} if network is None else {"network": network.name}
        try:
            container = self.client.containers.create(
                name=container_name("sdlocal", labels[LABEL_JOB], *name.split(), self.run_id),
                labels=labels, init=True, **where, **kwargs,
            )
            if aliases and network is not None:  # its host name, for the other hosts
                network.disconnect(container)
                network.connect(container, aliases=list(aliases))
            container.start()
        except docker_errors() as e:
            raise RuntimeLaunchError(f"cannot start {name}: {' '.join(str(e).split())}") from e
        handle = DockerHandle(name, log_path, container, labels)
        self.handles.append(handle)
        return handle

    def start_training(self, launch: TrainingLaunch) -> DockerHandle:
        # the SM_* variables name the container's /opt/ml; no GPU is passed to the container
        several = len(launch.hosts) > 1
        rendezvous = Rendezvous(launch.toolkit_env().master_host) if several else None
        cpus = self.host_limits.cpus if self.host_limits is not None else None
        env = launch.container_env(OPT_ML, CODE_DIR, num_gpus=0, rendezvous=rendezvous,
                                   num_cpus=math.ceil(cpus) if cpus is not None else None)
        hosts_network = None
        if launch.network_isolation:  # no network, hence no S3 endpoint or credentials either
            env = {k: v for k, v in env.items() if not k.startswith("AWS_")}
            hosts_network = self._hosts_network(launch.job_name) if several else None
        else:
            env = self._ensure_network(launch.job_name, env)
        image, note = training_image(launch.image, self.training_image, self.image_exists)
        if note:
            self.echo(note)
        container_config = launch.config_dir.with_name("config.container")
        mounts = training_mounts(launch.source_dir, launch.config_dir, launch.model_dir, container_config,
                                 launch.data_inputs, writable_copies=launch.command is not None)
        write_container_config(launch.config_dir, container_config, mounts)
        user = self.training_user or training_user(None)
        self._give_folders(user, mounts, launch)
        env = {**map_env(env, mounts), "HOME": "/tmp", "USER": "sdlocal" if not user.is_root else "root"}
        argv = launch.argv("python", rendezvous)
        volumes = dict(m.to_volume() for m in mounts)
        extra: dict[str, Any] = {}
        if launch.command is not None:
            # as in SageMaker's containers: /opt/ml/input is writable (ModelTrainer's drivers write
            # their sm_training.env there), and the scripts it starts get the zero-code hook
            from sdlocal.hook.zero_code import site_dir

            extra["tmpfs"] = {f"{OPT_ML}/input": "rw,exec,mode=1777,size=64m"}
            volumes[str(site_dir())] = {"bind": ZERO_CODE_DIR, "mode": "ro"}
            env["PYTHONPATH"] = ":".join(filter(None, [ZERO_CODE_DIR, env.get("PYTHONPATH")]))
        name = f"training {launch.job_name}" + (f" {launch.host}" if several else "")
        labels = self._labels(launch.job_name, "training", **({LABEL_HOST: launch.host} if several else {}))
        limits = self.host_limits.to_docker_kwargs() if self.host_limits is not None else {}
        return self._run(
            name, launch.log_path, labels, isolated=launch.network_isolation, network=hosts_network,
            aliases=(launch.host,) if launch.distributed else (), image=image, entrypoint=argv[:1],
            command=argv[1:], environment=env, working_dir="/opt/ml/code", user=user.to_docker(),
            volumes=volumes, shm_size="1g",
            **({"hostname": launch.host} if launch.distributed else {}), **limits, **extra,
        )

    @staticmethod
    def _give_folders(user: ContainerUser, mounts: list[Any], launch: TrainingLaunch) -> None:
        """The training's writable folders are its user's; its inputs are readable by it (else one line)."""
        inputs = [launch.source_dir] + ([launch.source_dir / launch.entry_point] if launch.entry_point else [])
        config = next(m.source for m in mounts if m.container.endswith("/input/config"))
        inputs += [config, *sorted(config.glob("*.json"))] if config is not None else []
        inputs += [d.host for d in launch.data_inputs]
        problem = unreadable_input(inputs, user)
        if problem:
            raise RuntimeLaunchError(problem)
        try:
            own_writable_mounts(mounts, user, host_is_root=os.geteuid() == 0)
        except OSError as e:
            raise RuntimeLaunchError(f"cannot give the job's output folders to the training container's user "
                                     f"(uid {user.uid}): {e}; or run it as root with --training-user root") from e

    def start_mpi(self, launches: Sequence[TrainingLaunch]) -> DockerHandle:
        from sdlocal.launcher.runtime.mpi import DOCKER_NO_MPI

        raise RuntimeLaunchError(DOCKER_NO_MPI)

    def start_rule(self, launch: RuleLaunch, **override: Any) -> DockerHandle:
        """The evaluator container (`override`: container options replaced, e.g. by tests)."""
        # A local custom rule file was uploaded by the launcher (JobSpec.with_uploaded_rule_code):
        # the evaluator downloads it from S3; an absolute path not on the host is inside the image.
        env = self._ensure_network(launch.job_name, launch.to_env())
        image = rule_image(launch.image, self.evaluator_image)
        kwargs = {
            "image": image, "environment": {**env, "HOME": "/tmp"}, "user": self._rule_user(image),
            "working_dir": "/tmp", **_HARDENING, **self.rule_limits(launch).to_docker_kwargs(), **override,
        }
        labels = self._labels(launch.job_name, "rule", **{LABEL_RULE: launch.rule_name})
        return self._run(f"rule {launch.rule_name}", launch.log_path, labels, **kwargs)

    def rule_limits(self, launch: RuleLaunch) -> RuleLimits:
        """--rule-memory/--rule-cpus if given, else the rule's InstanceType (capped at this host),
        else the defaults."""
        if self.limits is not None:
            return self.limits
        if launch.instance_type:
            return RuleLimits.for_instance(launch.instance_type, *host_resources())
        return RuleLimits()

    def _rule_user(self, image: str) -> str:
        """The image's own user unless it is root (then nobody): evaluators never run as root."""
        user = str(self.client.images.get(image).attrs.get("Config", {}).get("User") or "")
        return _NOBODY if user.split(":")[0] in ("", "0", "root") else user

    # -- cleanup ---------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop and remove this run's containers and network (unless `keep`); stop the host relay."""
        try:
            if not self.keep:
                remove_run(self.client, {LABEL_RUN: self.run_id})
        finally:  # an engine that stopped answering must not leave the relay or the wait threads
            for handle in self.handles:
                handle.release()
            if self._relay is not None:
                self._relay.close()
                self._relay = None


def remove_run(client: Any, labels: dict[str, str]) -> list[str]:
    """Remove (force) every container and network carrying `labels`; the names removed."""
    import docker.errors

    filters = {"label": [f"{k}={v}" for k, v in labels.items()]}
    removed = []
    for container in client.containers.list(all=True, filters=filters):
        with contextlib.suppress(docker.errors.NotFound):
            container.remove(force=True)
            removed.append(container.name)
    for network in client.networks.list(filters=filters):
        with contextlib.suppress(docker.errors.NotFound):
            network.remove()
            removed.append(network.name)
    return removed
