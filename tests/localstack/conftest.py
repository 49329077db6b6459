"""A real LocalStack container (testcontainers) for the whole session: the image of
`localstack/build-image` (.ci/run builds it before the tests). A missing image or engine skips,
or fails under CI=true, as tests/docker does."""
from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from sdlocal.launcher.runtime.process import pid_alive
from tests.conftest import missing
from tests.docker.conftest import sdlocal_images  # noqa: F401 - the docker runtime test's images

LOCALSTACK_VERSION = "4.14.0"  # localstack/build-image's version
DEFAULT_IMAGE = f"sdlocal-localstack:{LOCALSTACK_VERSION}"
START_TIMEOUT_S = 120  # LocalStack prints "Ready." in ~5 s; CI's 2 cores are shared


LABEL, PID_LABEL = "sdlocal.test", "sdlocal.test.pid"


def _remove_orphans(client: Any) -> None:
    """Containers of an earlier session that was killed before its teardown (no Ryuk to reap them):
    those whose pytest process is gone. A concurrent session's container is left alone."""
    for container in client.containers.list(all=True, filters={"label": f"{LABEL}=localstack"}):
        pid = container.labels.get(PID_LABEL, "")
        if not pid.isdigit() or not pid_alive(int(pid)):
            container.remove(force=True)


def localstack_image() -> str:
    return os.environ.get("SDLOCAL_LOCALSTACK_IMAGE") or DEFAULT_IMAGE


@pytest.fixture(scope="session")
def localstack_url(docker_client: Any) -> Iterator[str]:
    """The edge URL (http://127.0.0.1:<port>) of a LocalStack container started for this session."""
    import docker.errors

    image = localstack_image()
    try:
        docker_client.images.get(image)
    except docker.errors.ImageNotFound:
        missing(f"the LocalStack image {image} is missing: build it with `localstack/build-image`")

    # Ryuk (testcontainers' reaper) is an image of its own on Docker Hub, which may not answer:
    # the container is stopped and removed by this fixture instead.
    from testcontainers.community.localstack import LocalStackContainer
    from testcontainers.core.config import testcontainers_config

    testcontainers_config.ryuk_disabled = True
    _remove_orphans(docker_client)
    container = LocalStackContainer(image=image, region_name="us-east-1")
    container.with_services("s3", "sns", "sqs", "ses")
    container.with_kwargs(labels={LABEL: "localstack", PID_LABEL: str(os.getpid())})
    container.start(timeout=START_TIMEOUT_S)
    try:
        yield container.get_url()
    finally:
        container.stop()


@pytest.fixture()
def localstack_env(localstack_url: str, tmp_path: Any) -> dict[str, str]:
    """The environment of a user who points sdlocal at LocalStack (localstack/README.md): the
    endpoint for S3 and SNS, dummy credentials, a region; nothing of the developer's AWS setup."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({
        "AWS_ENDPOINT_URL": localstack_url,
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "SDLOCAL_HOME": str(tmp_path / "sdlocal-home"),
    })
    return env


def aws_client(service: str, url: str) -> Any:
    import boto3

    return boto3.client(service, endpoint_url=url, region_name="us-east-1",
                        aws_access_key_id="test", aws_secret_access_key="test")
