"""Wheels of the packages a job needs that sdlocal's training image lacks (for examples/hf/Dockerfile).

    python examples/hf/wheelhouse.py WHEELHOUSE PACKAGE... [--image sdlocal-training:0.1.0]

PACKAGE (transformers, accelerate, lightning, ...) and its dependencies, at the versions installed
on this host (what the host's runs used; a package not installed here is taken at its latest),
less what the image has already (its `pip list`: torch stays the image's CPU build), downloaded
as cp311 manylinux wheels with `pip download --no-deps` into WHEELHOUSE, with the
`requirements.txt` the Dockerfile installs. Nothing is downloaded again when WHEELHOUSE holds that
requirements.txt already. Prints a digest of the image's id and the requirements: a tag for the
image built from them (the same digest, the same image: no need to build it again).
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.metadata as md
import subprocess
import sys
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

# the image: Debian bookworm's / python:3.11-slim's CPython 3.11 on x86_64 Linux
ENVIRONMENT = {"python_version": "3.11", "python_full_version": "3.11.2", "platform_machine": "x86_64",
               "sys_platform": "linux", "platform_system": "Linux", "os_name": "posix",
               "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": ""}
PLATFORM_ARGS = ["--only-binary=:all:", "--python-version", "3.11", "--implementation", "cp", "--abi", "cp311",
                 "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
                 "--platform", "manylinux2014_x86_64"]


def image_packages(image: str) -> set[str]:
    """The distributions installed in `image`'s Python (its `pip list`)."""
    out = subprocess.run(["docker", "run", "--rm", "--entrypoint", "pip", image, "list", "--format", "freeze"],
                         capture_output=True, text=True, timeout=300, check=True).stdout
    return frozen_names(out)


def frozen_names(freeze: str) -> set[str]:
    """The distributions of `pip list --format freeze`'s output."""
    return {canonicalize_name(line.split("==")[0]) for line in freeze.splitlines() if "==" in line}


def _installed(name: str) -> str | None:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def requirements(packages: list[str], have: set[str]) -> list[str]:
    """`name==version` for `packages` and their dependencies (markers of the image's Python) not in
    `have`; the extras a requirement asks for are followed also where the image has the package
    (lightning's `fsspec[http]` needs aiohttp beside the image's fsspec)."""
    pins: dict[str, str] = {}
    followed: set[tuple[str, str]] = set()
    pending = [r for r in map(Requirement, packages) if r.marker is None or r.marker.evaluate(ENVIRONMENT)]
    while pending:
        req = pending.pop()
        name = canonicalize_name(req.name)  # its marker held where it was required (the extra's)
        version = _installed(name)
        if name not in have and name not in pins:
            pins[name] = f"{name}=={version}" if version else f"{name}{req.specifier}"
        if version is None:
            continue  # not on this host: pip download takes its latest, its dependencies unknown here
        extras = set(req.extras) | ({""} if name not in have else set())
        for extra in sorted(extras - {e for n, e in followed if n == name}):
            followed.add((name, extra))
            env = {**ENVIRONMENT, "extra": extra}
            pending += [r for r in map(Requirement, md.requires(name) or [])
                        if r.marker is None or r.marker.evaluate(env)]
    return sorted(pins.values())


def image_id(image: str) -> str:
    return subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", image], capture_output=True,
                          text=True, timeout=60, check=True).stdout.strip()


def build(wheelhouse: Path, packages: list[str], have: set[str], base_id: str) -> str:
    """Fill `wheelhouse` for an image whose Python has `have` (see the module's doc); the digest of
    `base_id` (the image's id) and the requirements."""
    text = "\n".join(requirements(packages, have)) + "\n"
    wheelhouse.mkdir(parents=True, exist_ok=True)
    listed = wheelhouse / "requirements.txt"
    if not listed.is_file() or listed.read_text() != text:
        listed.unlink(missing_ok=True)  # an interrupted download is redone next time
        for old in wheelhouse.glob("*.whl"):
            old.unlink()
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(wheelhouse),
                        *PLATFORM_ARGS, *text.split()], check=True, timeout=1200)
        listed.write_text(text)
    return hashlib.sha256(f"{base_id}\n{text}".encode()).hexdigest()[:12]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("wheelhouse", type=Path)
    p.add_argument("packages", nargs="+")
    p.add_argument("--image", default="sdlocal-training:0.1.0")
    args = p.parse_args()
    print(build(args.wheelhouse, args.packages, image_packages(args.image), image_id(args.image)))


if __name__ == "__main__":
    main()
