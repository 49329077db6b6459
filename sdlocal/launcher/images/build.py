"""The container images: their names, whether they exist, how to build them (docs/containers.md).

`sdlocal-training:<version>` (PyTorch CPU and XGBoost CPU + the hook) and `sdlocal-evaluator:<version>` (the rule
evaluator, no torch), version = the installed sdlocal version. Images install Python packages ONLY
from a wheelhouse built on the host (`build/wheelhouse`), never from the network inside a build.
Without an image registry the base image is debootstrapped from Debian packages
(`scripts/build-base-image` → `sdlocal-base:bookworm`).

The Docker client is created on first use (import, `--help` and unit tests never need Docker) and
can be injected."""
from __future__ import annotations

import importlib.metadata
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sdlocal.launcher.errors import LauncherError
from sdlocal.launcher.settings import LABEL_IMAGE

TRAINING_REPOSITORY = "sdlocal-training"
EVALUATOR_REPOSITORY = "sdlocal-evaluator"
DEFAULT_BASE_IMAGE = "python:3.11-slim"
OFFLINE_BASE_IMAGE = "sdlocal-base:bookworm"
BUILD_COMMAND = "sdlocal images build"
OFFLINE_BUILD_COMMAND = "sdlocal images build --offline"
IMAGE_LABEL = LABEL_IMAGE  # value: "training" | "evaluator"; says who owns an image

# What each image installs from the wheelhouse. tensorboard is installed without its dependencies:
# trial/proto.py imports only its protobuf modules (no grpcio, werkzeug, markdown, ...). matplotlib
# draws the rules' HTML reports (ProfilerReport, the XGBoost report) in the evaluator image. The
# training image runs PyTorch and XGBoost jobs alike: xgboost-cpu (the CPU build of `xgboost`, 6 MB,
# plus scipy) beside torch's CPU build; the hook run picks what the script imports. pyarrow: SageMaker's
# XGBoost algorithm reads application/x-parquet channels with it (hook/algorithms/xgboost_data.py).
# absl-py and pillow: what a script's own `torch.utils.tensorboard.SummaryWriter` needs of tensorboard's
# dependencies (its tensorflow stub imports absl; add_image uses PIL), not the TensorBoard server's.
COMMON_REQUIREMENTS = ("numpy", "protobuf")
EVALUATOR_REQUIREMENTS = (*COMMON_REQUIREMENTS, "boto3", "botocore", "matplotlib")
TRAINING_REQUIREMENTS = (*COMMON_REQUIREMENTS, "torch", "xgboost-cpu", "pyarrow", "absl-py", "pillow")
NO_DEPS_REQUIREMENTS = ("tensorboard",)
TORCH_DEFAULT_VERSION = "2.13.0"
PYTHON_VERSION = "3.11"  # Debian bookworm's python3 and python:3.11-slim: cp311 wheels fit both

Echo = Callable[[str], None]
Runner = Callable[..., "subprocess.CompletedProcess[Any]"]


class ImageError(LauncherError):
    """An image is missing or could not be built."""


def sdlocal_version() -> str:
    return importlib.metadata.version("sdlocal")


def training_image(version: str | None = None) -> str:
    return f"{TRAINING_REPOSITORY}:{version or sdlocal_version()}"


def evaluator_image(version: str | None = None) -> str:
    return f"{EVALUATOR_REPOSITORY}:{version or sdlocal_version()}"


def default_client(timeout: int = 60) -> Any:
    import docker

    return docker.from_env(timeout=timeout)


def image_exists(name: str, client: Any = None) -> bool:
    """True when `name` is an image in the local engine (no pull is attempted)."""
    import docker.errors

    client = client or default_client()
    try:
        client.images.get(name)
    except docker.errors.ImageNotFound:
        return False
    return True


def missing_image_message(name: str) -> str:
    """The one line telling the user what to run when `name` is missing."""
    return (
        f"image {name} not found in the local Docker engine: build it with `{BUILD_COMMAND}` "
        f"(without an image registry: `{OFFLINE_BUILD_COMMAND}`)"
    )


def missing_images(names: Iterable[str] | None = None, client: Any = None) -> list[str]:
    client = client or default_client()
    wanted = list(names) if names is not None else [training_image(), evaluator_image()]
    return [n for n in wanted if not image_exists(n, client)]


def require_images(names: Iterable[str], client: Any = None) -> None:
    """Raises ImageError with the build command when one of `names` is missing."""
    missing = missing_images(names, client)
    if missing:
        raise ImageError(missing_image_message(", ".join(missing)))


# ---------------------------------------------------------------------------------------- wheelhouse


def _installed_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def pinned(name: str) -> str:
    """`name==<the host's installed version>`, so the images run what the host's tests ran. torch is
    pinned to its CPU build (`+cpu`): the wheelhouse must never pull CUDA packages."""
    version = _installed_version(name)
    if name == "torch":
        base = (version or TORCH_DEFAULT_VERSION).split("+", 1)[0]
        return f"torch=={base}+cpu"
    return f"{name}=={version}" if version else name


@dataclass(frozen=True)
class Requirements:
    training: tuple[str, ...]
    evaluator: tuple[str, ...]
    no_deps: tuple[str, ...]

    @classmethod
    def from_host(cls) -> Requirements:
        return cls(
            training=tuple(pinned(n) for n in TRAINING_REQUIREMENTS),
            evaluator=tuple(pinned(n) for n in EVALUATOR_REQUIREMENTS),
            no_deps=tuple(pinned(n) for n in NO_DEPS_REQUIREMENTS),
        )

    def files(self) -> dict[str, str]:
        """The requirement files the Dockerfiles read from the wheelhouse."""
        return {
            "training-requirements.txt": "\n".join(self.training) + "\n",
            "evaluator-requirements.txt": "\n".join(self.evaluator) + "\n",
            "nodeps-requirements.txt": "\n".join(self.no_deps) + "\n",
        }


def _platform_args() -> list[str]:
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower(), platform.machine().lower())
    tags = [f"manylinux_2_{m}_{machine}" for m in (28, 17)] + [f"manylinux2014_{machine}"]
    args = ["--only-binary=:all:", "--python-version", PYTHON_VERSION, "--implementation", "cp"]
    args += ["--abi", "cp" + PYTHON_VERSION.replace(".", "")]
    for tag in tags:
        args += ["--platform", tag]
    return args


def _run(cmd: Sequence[str], echo: Echo, run: Runner) -> None:
    """Run a build step; a failure shows its last output lines, then one error line naming the step
    and the last line that says what went wrong."""
    echo("$ " + " ".join(cmd))
    result = run(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        lines = (result.stdout or "").strip().splitlines()
        for line in lines[-15:]:
            echo(f"  {line}")
        errors = [line for line in lines if line.lstrip().startswith("ERROR")] or lines or ["no output"]
        raise ImageError(f"`{' '.join(cmd[:6])} ...` failed (exit {result.returncode}): {errors[-1].strip()}")


def build_wheelhouse(
    wheelhouse: Path,
    source: Path,
    *,
    requirements: Requirements | None = None,
    echo: Echo = print,
    run: Runner = subprocess.run,
) -> Path:
    """Fills `wheelhouse` with cp311 manylinux wheels of the images' requirements (downloaded once,
    skipped when the requirement files are unchanged) and the sdlocal wheel built from `source`
    (always rebuilt, in `wheelhouse/sdlocal/`, its own Docker layer)."""
    requirements = requirements or Requirements.from_host()
    wheelhouse.mkdir(parents=True, exist_ok=True)
    files = requirements.files()
    up_to_date = all((wheelhouse / n).is_file() and (wheelhouse / n).read_text() == t for n, t in files.items())
    pip = [sys.executable, "-m", "pip"]
    if up_to_date:
        echo(f"wheelhouse {wheelhouse}: requirements unchanged, not downloading again")
    else:
        for name in files:
            (wheelhouse / name).unlink(missing_ok=True)  # an interrupted download is redone next time
        reqs = sorted(set(requirements.training) | set(requirements.evaluator))
        _run([*pip, "download", "-q", "-d", str(wheelhouse), *_platform_args(), *reqs], echo, run)
        _run([*pip, "download", "-q", "--no-deps", "-d", str(wheelhouse), *_platform_args(),
              *requirements.no_deps], echo, run)
        cuda = sorted(p.name for p in wheelhouse.glob("nvidia_*.whl"))
        if cuda:
            raise ImageError(f"the wheelhouse pulled CUDA packages ({', '.join(cuda)}); use torch's CPU build")
        for name, text in files.items():
            (wheelhouse / name).write_text(text)
    own = wheelhouse / "sdlocal"
    shutil.rmtree(own, ignore_errors=True)
    # built as pip builds any project: in an isolated environment with the build backend it asks
    # for (hatchling, from the package index), so the README's install line is all a user needs
    _run([*pip, "wheel", "-q", "--no-deps", "-w", str(own), str(source)], echo, run)
    return wheelhouse


# ------------------------------------------------------------------------------------------- images


def find_build_context(start: Path | None = None) -> Path:
    """The directory holding Dockerfile.training/.evaluator: a clone of the repository (an editable
    install finds it above the `sdlocal` folder; else the current directory)."""
    candidates = [start] if start else [Path(__file__).resolve().parents[3], Path.cwd()]
    for path in candidates:
        if path and (path / "Dockerfile.evaluator").is_file() and (path / "Dockerfile.training").is_file():
            return path
    where = ", ".join(str(c) for c in candidates if c)
    raise ImageError(f"Dockerfile.training/Dockerfile.evaluator not found in {where}: run from a clone of sdlocal")


def registry_answers(client: Any, image: str = DEFAULT_BASE_IMAGE) -> bool:
    """Pulls `image` through the engine; False when no registry answers (air-gapped hosts)."""
    import docker.errors

    try:
        client.images.pull(image)
    except (docker.errors.APIError, docker.errors.DockerException, OSError):
        return False
    return True


def resolve_base_image(
    client: Any,
    base_image: str | None,
    offline: bool | None,
    context: Path,
    *,
    echo: Echo = print,
    run: Runner = subprocess.run,
) -> str:
    """`base_image` if given; else python:3.11-slim when present or pullable (offline=None: auto);
    else (or offline=True) sdlocal-base:bookworm, debootstrapped by scripts/build-base-image."""
    if base_image:
        return base_image
    if offline is not True:
        if image_exists(DEFAULT_BASE_IMAGE, client):
            return DEFAULT_BASE_IMAGE
        if offline is None and registry_answers(client):
            return DEFAULT_BASE_IMAGE
        if offline is False:
            raise ImageError(f"cannot pull {DEFAULT_BASE_IMAGE}: no registry answers; use --offline")
        echo(f"no registry answers for {DEFAULT_BASE_IMAGE}: building the base image offline")
    if image_exists(OFFLINE_BASE_IMAGE, client):
        echo(f"base image {OFFLINE_BASE_IMAGE} exists")
        return OFFLINE_BASE_IMAGE
    script = context / "scripts" / "build-base-image"
    started = time.monotonic()
    _run([str(script), OFFLINE_BASE_IMAGE], echo, run)
    echo(f"built {OFFLINE_BASE_IMAGE} in {time.monotonic() - started:.0f} s")
    return OFFLINE_BASE_IMAGE


def docker_build(
    client: Any,
    context: Path,
    dockerfile: str,
    tag: str,
    *,
    buildargs: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    echo: Echo = print,
) -> str:
    """Builds `dockerfile` in `context` as `tag` (the engine's classic builder; .dockerignore applies),
    echoing its progress lines; returns the image id. A failed step raises ImageError."""
    image_id = ""
    last: list[str] = []
    stream = client.api.build(
        path=str(context), dockerfile=dockerfile, tag=tag, buildargs=buildargs or {}, labels=labels or {},
        rm=True, forcerm=True, decode=True,
    )
    for chunk in stream:
        if "error" in chunk:
            detail = " ".join(str(chunk["error"]).split())
            raise ImageError(f"building {tag} from {dockerfile} failed: {detail}\n" + "\n".join(last[-10:]))
        text = chunk.get("stream", "")
        for line in text.splitlines():
            if line.strip():
                last.append(line.rstrip())
                echo(line.rstrip())
        if "aux" in chunk and "ID" in chunk["aux"]:
            image_id = chunk["aux"]["ID"]
    if not image_id:
        image_id = client.images.get(tag).id
    return str(image_id)


def _image_id(client: Any, name: str) -> str | None:
    import docker.errors

    try:
        return str(client.images.get(name).id)
    except docker.errors.ImageNotFound:
        return None


def _remove_quietly(client: Any, image_id: str) -> None:
    import docker.errors

    try:
        client.images.remove(image_id, noprune=False)
    except docker.errors.APIError:
        pass  # still tagged elsewhere or used by a container: keep it


@dataclass(frozen=True)
class BuiltImages:
    training: str
    evaluator: str
    base_image: str
    seconds: dict[str, float]


def build_images(
    base_image: str | None = None,
    offline: bool | None = None,
    echo: Echo = print,
    *,
    client: Any = None,
    context: Path | None = None,
    wheelhouse: Path | None = None,
    which: Sequence[str] = ("evaluator", "training"),
    run: Runner = subprocess.run,
) -> BuiltImages:
    """Builds the base image if needed (offline), the wheelhouse, then tags `sdlocal-evaluator:<v>` and
    `sdlocal-training:<v>`. offline: True = debootstrap base, False = registry base, None = auto."""
    client = client or default_client(timeout=1800)
    context = find_build_context(context)
    wheelhouse = wheelhouse or context / "build" / "wheelhouse"
    if wheelhouse.resolve() != (context / "build" / "wheelhouse").resolve():
        raise ImageError(f"the wheelhouse must be {context / 'build' / 'wheelhouse'} (the Dockerfiles COPY it)")
    unknown = [kind for kind in which if kind not in ("training", "evaluator")]
    if unknown:  # before minutes of base image and wheelhouse work
        raise ImageError(f"unknown image kind {unknown[0]!r}: expected training or evaluator")
    seconds: dict[str, float] = {}

    started = time.monotonic()
    base = resolve_base_image(client, base_image, offline, context, echo=echo, run=run)
    seconds["base"] = time.monotonic() - started
    started = time.monotonic()
    build_wheelhouse(wheelhouse, context, echo=echo, run=run)
    seconds["wheelhouse"] = time.monotonic() - started

    version = sdlocal_version()
    tags = {"training": training_image(version), "evaluator": evaluator_image(version)}
    for kind in which:
        started = time.monotonic()
        echo(f"== building {tags[kind]} FROM {base}")
        previous = _image_id(client, tags[kind])
        new_id = docker_build(
            client, context, f"Dockerfile.{kind}", tags[kind], buildargs={"BASE_IMAGE": base},
            labels={IMAGE_LABEL: kind, "sdlocal.version": version, "sdlocal.base-image": base}, echo=echo,
        )
        seconds[kind] = time.monotonic() - started
        if previous and previous != new_id:
            _remove_quietly(client, previous)  # the replaced image, now untagged (~1 GB for training)
        echo(f"== built {tags[kind]} in {seconds[kind]:.0f} s")
    return BuiltImages(tags["training"], tags["evaluator"], base, seconds)


def list_images(client: Any = None) -> list[tuple[str, str, int]]:
    """(tag, short id, size in bytes) of every image carrying the sdlocal label, sorted by tag."""
    client = client or default_client()
    rows = []
    for image in client.images.list(filters={"label": IMAGE_LABEL}):
        for tag in image.tags or ["<none>"]:
            rows.append((tag, image.short_id.removeprefix("sha256:"), int(image.attrs.get("Size", 0))))
    return sorted(rows)
