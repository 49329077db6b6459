"""`sdlocal images build|list`: thin commands over launcher/images/build.py (wired into the CLI by
launcher/cli/__init__.py with `cli.add_command(images)`)."""
from __future__ import annotations

import click

from sdlocal.launcher.errors import LauncherError


def _human(size: int) -> str:
    return f"{size / 1e6:.0f} MB" if size < 1e9 else f"{size / 1e9:.2f} GB"


@click.group(help="The container images of the docker runtime (docs/containers.md).")
def images() -> None:
    pass


@images.command("build", help="Build the wheelhouse and the sdlocal-training/sdlocal-evaluator images.")
@click.option("--base-image", default=None, metavar="IMAGE",
              help="Base image with python3.11 (default python:3.11-slim; sdlocal-base:bookworm offline).")
@click.option("--offline/--online", "offline", default=None,
              help="--offline: debootstrap the base image (no registry); default: auto-detect.")
@click.option("--only", type=click.Choice(["training", "evaluator"]), multiple=True,
              help="Build only this image (repeatable).")
def build(base_image: str | None, offline: bool | None, only: tuple[str, ...]) -> None:
    from sdlocal.launcher.images.build import build_images

    try:
        built = build_images(base_image=base_image, offline=offline, echo=click.echo,
                             which=only or ("evaluator", "training"))
    except LauncherError as e:
        raise click.ClickException(str(e)) from e
    times = ", ".join(f"{k} {v:.0f} s" for k, v in built.seconds.items())
    click.echo(f"built {', '.join(only or ('evaluator', 'training'))} images FROM {built.base_image} ({times})")


@images.command("list", help="The sdlocal images in the local engine and whether the needed ones exist.")
def list_() -> None:
    from sdlocal.launcher.images.build import (
        evaluator_image,
        list_images,
        missing_image_message,
        missing_images,
        training_image,
    )

    try:
        rows = list_images()
        missing = missing_images([training_image(), evaluator_image()])
    except Exception as e:  # noqa: BLE001 - no engine: one line, not a traceback
        raise click.ClickException(f"Docker: {' '.join(str(e).split())}") from e
    for tag, short_id, size in rows:
        click.echo(f"{tag:40} {short_id:14} {_human(size):>9}")
    for name in missing:
        click.echo(missing_image_message(name))
