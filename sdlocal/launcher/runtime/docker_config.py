"""The pure parts of the docker runtime: image mapping, host→container path rewriting, limits.

No docker calls here: everything is a function of its arguments (unit-tested without an engine).
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sdlocal.launcher.errors import RuntimeLaunchError
from sdlocal.launcher.settings import GATEWAY_PORT
from sdlocal.launcher.spec.values import instance_resources, is_debugger_rule_image

OPT_ML = "/opt/ml"
CODE_DIR = f"{OPT_ML}/code"
CONFIG_DIR = f"{OPT_ML}/input/config"
OUTPUT_DIR = f"{OPT_ML}/output"
MODEL_DIR = f"{OPT_ML}/model"
_ECR = re.compile(r"^\d{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(\.cn)?/")
_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_NAME_CHARS = re.compile(r"[^a-zA-Z0-9_.-]+")


class LimitsError(RuntimeLaunchError):
    """A resource limit flag could not be parsed; names the flag."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


def parse_memory(value: str | int, field: str = "--rule-memory") -> int:
    """'2g', '512m', '2GiB', '1073741824' → bytes (binary units, as docker)."""
    if isinstance(value, int):
        number, unit = float(value), ""
    else:
        match = _MEMORY.match(value)
        if not match:
            raise LimitsError(field, f"{value!r} is not a memory size like 512m or 2g")
        number, unit = float(match.group(1)), match.group(2).lower()
    size = int(number * 1024 ** "_kmgt".index(unit or "_"))
    if size < 32 * 1024 * 1024:
        raise LimitsError(field, f"{value!r} is below docker's usable minimum (32m)")
    return size


def parse_cpus(value: str | float, field: str = "--rule-cpus") -> float:
    try:
        cpus = float(value)
    except (TypeError, ValueError):
        raise LimitsError(field, f"{value!r} is not a number of CPUs like 1 or 0.5") from None
    if not 0.01 <= cpus <= 1024:
        raise LimitsError(field, f"{value!r} must be between 0.01 and 1024")
    return cpus


@dataclass(frozen=True)
class RuleLimits:
    """Resource limits of one evaluator container (defaults: 2 GiB, 1 CPU, 256 processes)."""

    memory_bytes: int = 2 * 1024**3
    cpus: float = 1.0
    pids: int = 256

    @classmethod
    def from_flags(cls, memory: str | None = None, cpus: str | None = None) -> RuleLimits:
        default = cls()
        return cls(
            parse_memory(memory) if memory is not None else default.memory_bytes,
            parse_cpus(cpus) if cpus is not None else default.cpus,
        )

    @classmethod
    def for_instance(cls, instance_type: str, host_cpus: float, host_memory_bytes: int) -> RuleLimits:
        """The limits of a RuleConfiguration's `InstanceType` (`ml.<family>.<size>`): its vCPUs
        (medium/large 2, xlarge 4, Nxlarge 4N) and memory (per vCPU: c 2 GiB, t 2 GiB, m 4 GiB,
        r 8 GiB, others 4 GiB), each capped at what this host has."""
        vcpus, memory_gib = instance_resources(instance_type)
        return cls(min(int(memory_gib * 1024**3), host_memory_bytes), min(float(vcpus), host_cpus))

    def to_docker_kwargs(self) -> dict[str, Any]:
        return {"mem_limit": self.memory_bytes, "memswap_limit": self.memory_bytes,
                "nano_cpus": int(self.cpus * 1e9), "pids_limit": self.pids}


@dataclass(frozen=True)
class HostLimits:
    """`--host-cpus` / `--host-memory`: the limits of each training container (one per host), so
    several hosts fit on one machine; None: no limit (as a single training container has)."""

    memory_bytes: int | None = None
    cpus: float | None = None

    @classmethod
    def from_flags(cls, memory: str | None = None, cpus: str | None = None) -> HostLimits | None:
        if memory is None and cpus is None:
            return None
        return cls(parse_memory(memory, "--host-memory") if memory is not None else None,
                   parse_cpus(cpus, "--host-cpus") if cpus is not None else None)

    def to_docker_kwargs(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.memory_bytes is not None:
            out.update(mem_limit=self.memory_bytes, memswap_limit=self.memory_bytes)
        if self.cpus is not None:
            out["nano_cpus"] = int(self.cpus * 1e9)
        return out


def host_resources() -> tuple[float, int]:
    """(CPUs, bytes of memory) of this host: the most an instance type's limits may ask."""
    return float(os.cpu_count() or 1), os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def is_ecr_image(image: str) -> bool:
    return bool(_ECR.match(image))


def rule_image(requested: str | None, evaluator_image: str) -> str:
    """SageMaker's built-in rule images (or none) → our evaluator image; any other image runs as a
    custom rule image with the same environment contract."""
    return evaluator_image if is_debugger_rule_image(requested) else str(requested)


def training_image(requested: str | None, default: str, exists: Callable[[str], bool]) -> tuple[str, str | None]:
    """(image to run, a note to say or None). A local image is used as given; ECR deep-learning
    images and anything not present locally map to our training image."""
    if not requested:
        return default, None
    if exists(requested):
        return requested, None
    why = "a SageMaker ECR image" if is_ecr_image(requested) else "not a local image"
    return default, f"TrainingImage {requested} is {why}; running it as {default}"


def container_name(*parts: str) -> str:
    """A docker-valid container/network name from free text (rule names may hold any printable)."""
    name = "-".join(_NAME_CHARS.sub("_", p).strip("_.-") or "x" for p in parts)
    return name[:200]


@dataclass(frozen=True)
class Mount:
    host: Path  # what a host path under `host` maps to
    container: str
    read_only: bool = False
    source: Path | None = None  # the host path actually mounted, when it differs (a rewritten copy)

    def to_volume(self) -> tuple[str, dict[str, str]]:
        return str(self.source or self.host), {"bind": self.container, "mode": "ro" if self.read_only else "rw"}


def map_path(value: str, mounts: Iterable[Mount]) -> str:
    """A host path under a mount → the container's path; anything else unchanged."""
    for m in sorted(mounts, key=lambda m: len(str(m.host)), reverse=True):
        host = str(m.host)
        if value == host:
            return m.container
        if value.startswith(host.rstrip("/") + "/"):
            return m.container + value[len(host.rstrip("/")):]
    return value


def map_json(data: Any, mounts: Iterable[Mount]) -> Any:
    """Every string of a JSON document that is a mounted host path, rewritten (config files)."""
    mounts = list(mounts)
    if isinstance(data, str):
        return map_path(data, mounts)
    if isinstance(data, list):
        return [map_json(v, mounts) for v in data]
    if isinstance(data, dict):
        return {k: map_json(v, mounts) for k, v in data.items()}
    return data


def map_env(env: Mapping[str, str], mounts: Iterable[Mount]) -> dict[str, str]:
    mounts = list(mounts)
    return {k: map_path(v, mounts) for k, v in env.items()}


def training_mounts(source_dir: Path, config_dir: Path, model_dir: Path, container_config: Path,
                    data_inputs: Iterable[Any] = (), *, writable_copies: bool = False) -> list[Mount]:
    """The training container's /opt/ml. `config_dir` is the job's `input/config` (JobDir layout:
    the job root is two levels up, its `output/` is the hook's output that the launcher uploads).
    `data_inputs` (runtime `DataInput`s: `rel` under /opt/ml, `host` path) are the channels,
    mounted read-only at /opt/ml/input/data/<channel>; with `writable_copies` (a container command:
    SageMaker's channels are writable, and ModelTrainer's `chmod +x`es its driver script in one) the
    channels downloaded into the job folder are writable, a local channel (the user's folder) never."""
    job_root = config_dir.parent.parent

    def channel(d: Any) -> Mount:
        host = d.host.resolve()
        own_copy = writable_copies and host.is_relative_to(job_root.resolve())
        return Mount(job_root / d.rel, f"{OPT_ML}/{d.rel}", read_only=not own_copy, source=host)

    return [
        Mount(source_dir, CODE_DIR, read_only=True),
        Mount(config_dir, CONFIG_DIR, read_only=True, source=container_config),
        Mount(job_root / "output", OUTPUT_DIR),
        Mount(model_dir, MODEL_DIR),
        *(channel(d) for d in data_inputs),
    ]


def write_container_config(config_dir: Path, dest: Path, mounts: Iterable[Mount]) -> None:
    """Copy `input/config/*.json` to `dest` with host paths (LocalPath, ...) rewritten."""
    mounts = list(mounts)
    dest.mkdir(parents=True, exist_ok=True)
    for path in sorted(config_dir.glob("*.json")):
        data = json.loads(path.read_text())
        (dest / path.name).write_text(json.dumps(map_json(data, mounts), indent=2) + "\n")


@dataclass(frozen=True)
class Endpoint:
    """An S3 endpoint URL taken apart: where the host relay forwards to."""

    scheme: str
    host: str
    port: int

    @classmethod
    def parse(cls, url: str) -> Endpoint:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise RuntimeLaunchError(f"AWS_ENDPOINT_URL_S3 {url!r} is not an http(s)://host[:port] URL")
        return cls(parts.scheme, parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))

    def via(self, gateway_ip: str) -> str:
        """The URL containers use: the gateway's IP (an IP keeps botocore on path-style addressing)."""
        return f"{self.scheme}://{gateway_ip}:{GATEWAY_PORT}"




# -- the training container's user -------------------------------------------------------------
CONTAINER_UID = 1000  # the evaluator image's `sdlocal` user; the training runs as it when sdlocal runs as root


@dataclass(frozen=True)
class ContainerUser:
    uid: int
    gid: int

    @property
    def is_root(self) -> bool:
        return self.uid == 0

    def to_docker(self) -> str:
        return f"{self.uid}:{self.gid}"


def training_user(value: str | None, host_uid: int | None = None, host_gid: int | None = None) -> ContainerUser:
    """`--training-user`: None (default) runs the training as the user running sdlocal, or as uid/gid
    1000 when that is root; `root` as root (an image that needs it); `UID[:GID]` as given (GID
    defaults to UID). Never a name: the runtime must know the numbers to own the job's folders."""
    host_uid = os.getuid() if host_uid is None else host_uid
    host_gid = os.getgid() if host_gid is None else host_gid
    if value is None or not value.strip():
        return ContainerUser(CONTAINER_UID, CONTAINER_UID) if host_uid == 0 else ContainerUser(host_uid, host_gid)
    text = value.strip()
    if text == "root":
        return ContainerUser(0, 0)
    uid, sep, gid = text.partition(":")
    if not uid.isdigit() or (sep and not gid.isdigit()):
        raise RuntimeLaunchError(f"--training-user: {value!r} is not root or UID[:GID] (numbers)")
    return ContainerUser(int(uid), int(gid or uid))


def _can(path: Path, user: ContainerUser, bits: int) -> bool:
    """Whether `user` (its own uid and gid only: a numeric user has no other groups) has the `bits`
    (4 read, 2 write, 1 execute/search) on `path`, from its mode alone."""
    if user.is_root:
        return True
    st = path.stat()
    if st.st_uid == user.uid:
        mode = st.st_mode >> 6
    elif st.st_gid == user.gid:
        mode = st.st_mode >> 3
    else:
        mode = st.st_mode
    return mode & bits == bits


def own_writable_mounts(mounts: Iterable[Mount], user: ContainerUser, *, host_is_root: bool) -> None:
    """The training's writable folders (output/, model/) made the container user's: sdlocal as root
    gives them to it (they are the job's own, made for this run); otherwise they must already be
    writable by it (the default user is the one running sdlocal, who made them)."""
    for m in mounts:
        if m.read_only or user.is_root:
            continue
        path = m.source or m.host
        if host_is_root:
            for folder, dirs, files in os.walk(path):
                for name in [folder, *(os.path.join(folder, n) for n in dirs + files)]:
                    os.chown(name, user.uid, user.gid, follow_symlinks=False)
        elif not _can(path, user, 7):
            raise RuntimeLaunchError(f"the training container runs as uid {user.uid} and cannot write to {path} "
                                     f"(owner uid {path.stat().st_uid}): leave out --training-user to run it as yourself")


def unreadable_input(paths: Iterable[Path], user: ContainerUser) -> str | None:
    """The first of the training's inputs (code folder, entry point, config files, channels) that
    `user` cannot read, as one line; None when it can read them all."""
    for path in paths:
        try:
            folder = path.is_dir()
            if _can(path, user, 5 if folder else 4):
                continue
            st = path.stat()
        except OSError:
            continue  # missing: the mount fails with the engine's own message
        return (f"the training container runs as uid {user.uid} and cannot read {path} (owner uid {st.st_uid}, "
                f"mode {st.st_mode & 0o777:04o}): make it readable (chmod o+r{'x' if folder else ''}) "
                "or run the training as root with --training-user root")
    return None
