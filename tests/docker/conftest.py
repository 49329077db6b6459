"""Fixtures for tests that start real containers: the sdlocal images (built by `sdlocal images build`,
which .ci/run does before the tests). A missing image skips, or fails under CI=true."""
from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from tests.conftest import missing as missing_requirement


class SdlocalImages(NamedTuple):
    training: str
    evaluator: str


@pytest.fixture(scope="session")
def sdlocal_images(docker_client: Any) -> SdlocalImages:
    """The names of the training and evaluator images of this sdlocal version, once they exist."""
    from sdlocal.launcher.images.build import (
        evaluator_image,
        missing_image_message,
        missing_images,
        training_image,
    )

    images = SdlocalImages(training=training_image(), evaluator=evaluator_image())
    missing = missing_images(images, client=docker_client)
    if missing:
        missing_requirement("an image is missing: " + "; ".join(missing_image_message(name) for name in missing))
    return images


@pytest.fixture(scope="session")
def custom_rule_image(docker_client: Any, sdlocal_images: SdlocalImages) -> Iterator[str]:
    """custom_rules/image built FROM this version's evaluator image (WeightNormRule at /opt/rules/)."""
    from sdlocal.launcher.images import build as img

    tag = f"sdlocal-test-my-rules:{uuid.uuid4().hex[:8]}"
    img.docker_build(
        docker_client, Path(__file__).resolve().parents[2] / "custom_rules" / "image", "Dockerfile", tag,
        buildargs={"EVALUATOR_IMAGE": sdlocal_images.evaluator}, labels={"sdlocal.test": "custom_rule_image"},
        echo=lambda _line: None,
    )
    try:
        yield tag
    finally:
        docker_client.images.remove(tag, force=True)
