"""Which S3 a command talks to: chosen before anything starts, and said.

First match wins:
1. `--s3-endpoint-url URL`;
2. `--s3 embedded|aws` (or `SDLOCAL_S3`): `aws` is Amazon S3 with your AWS credentials (and the
   endpoint your AWS settings name, as boto3 picks it), the only way sdlocal reaches a cloud
   account; `embedded` is the embedded S3 whatever the environment says;
3. `AWS_ENDPOINT_URL_S3`, then `AWS_ENDPOINT_URL` (every service's endpoint, as LocalStack's docs
   set it): an endpoint named in the environment;
4. the embedded S3 (launcher/s3/embedded.py), with dummy credentials.
AWS credentials alone (`~/.aws`, `AWS_PROFILE`, `AWS_ACCESS_KEY_ID`: every SageMaker user has
them) never change where data goes; `describe()` says they were found and not used.

First contact: `check_answers()` asks the endpoint once, with a deadline of seconds, before a job or
a command starts on it, so that a typo (`--s3-endpoint-url http://127.0.0.1:1`) fails in one line
at once. The retries of every later call (trial/storage/_retry.py, 120 s) are for outages of an
endpoint that answered.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sdlocal.launcher.errors import S3EndpointError
from sdlocal.launcher.settings import S3, S3_CHOICES, s3_choice, sdlocal_home
from sdlocal.trial.errors import one_line

DEFAULT_BUCKET = "sdlocal"
REGION = "us-east-1"
DUMMY_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "sdlocal", "AWS_SECRET_ACCESS_KEY": "sdlocal"}
FIRST_CONTACT_S = 5.0  # how long a command waits for an endpoint that has not answered yet

_SOURCES = {
    "flag": "--s3-endpoint-url",
    "env": "AWS_ENDPOINT_URL_S3",
    "env-global": "AWS_ENDPOINT_URL",
}


@dataclass(frozen=True)
class S3Endpoint:
    url: str | None  # None: AWS's own endpoints
    # "flag" | "env" (AWS_ENDPOINT_URL_S3) | "env-global" (AWS_ENDPOINT_URL) | "aws" | "embedded" | "serve"
    source: str
    dummy_credentials: bool = False
    unused_credentials: bool = False  # AWS credentials were found and are not used (said by describe)

    def client(self, **config: Any) -> Any:
        import boto3

        from sdlocal.trial.storage import client_config

        # bounded timeouts (a frozen endpoint fails a try instead of hanging it), no botocore retries:
        # trial's Storage retries every call through outages (trial/storage/_retry.py)
        kwargs: dict[str, Any] = {"region_name": os.environ.get("AWS_DEFAULT_REGION") or REGION,
                                  "config": client_config(**config)}
        if self.url:
            kwargs["endpoint_url"] = self.url
        if self.dummy_credentials:
            kwargs["aws_access_key_id"] = DUMMY_CREDENTIALS["AWS_ACCESS_KEY_ID"]
            kwargs["aws_secret_access_key"] = DUMMY_CREDENTIALS["AWS_SECRET_ACCESS_KEY"]
        return boto3.client("s3", **kwargs)

    def child_env(self) -> dict[str, str]:
        """Environment for the training/evaluator processes so that they reach the same S3."""
        env: dict[str, str] = {}
        if self.url:
            env["AWS_ENDPOINT_URL_S3"] = self.url
        if self.dummy_credentials:
            env.update(DUMMY_CREDENTIALS)
            env.setdefault("AWS_DEFAULT_REGION", REGION)
        return env

    def describe(self) -> str:
        if self.source in _SOURCES:
            line = f"S3: {self.url} ({_SOURCES[self.source]})"
        else:
            line = {
                "aws": "S3: Amazon S3 with your AWS credentials (--s3 aws)",
                "embedded": f"S3: the embedded server at {self.url} (stop it with `sdlocal s3 stop`)",
                "serve": f"S3: sdlocal serve at {self.url}",
            }[self.source]
        if self.unused_credentials:
            line += "; your AWS credentials are not used (`--s3 aws` sends the job's data to Amazon S3)"
        return line

    def check_answers(self, timeout_s: float = FIRST_CONTACT_S, *,
                      clock: Callable[[], float] = time.monotonic,
                      sleep: Callable[[float], None] = time.sleep) -> None:
        """First contact: S3EndpointError within `timeout_s` seconds when nothing answers at the
        endpoint (connection refused, no route, no connection within the deadline). Any answer
        counts (an access error too: the endpoint is there), and so does a connection it accepted but
        answers slowly (a LocalStack still starting): that is an outage, which the calls ride out."""
        from botocore.exceptions import ClientError, ConnectionError, HTTPClientError, ReadTimeoutError

        client = self.client(connect_timeout=min(2.0, timeout_s), read_timeout=timeout_s)
        deadline = clock() + timeout_s
        while True:
            try:
                client.list_buckets()
                return
            except (ClientError, ReadTimeoutError):
                return  # it answered (AccessDenied, ...), or took the connection: the calls go on from here
            except (ConnectionError, HTTPClientError) as e:
                if clock() >= deadline:
                    where = self.url or "Amazon S3"
                    raise S3EndpointError(f"S3 endpoint {where} does not answer "
                                          f"({_SOURCES.get(self.source, self.source)}): {one_line(e, 200)}") from None
                sleep(0.25)


def aws_credentials_present(environ: Mapping[str, str] | None = None, home: Path | None = None) -> bool:
    """Credentials that boto3 would find without asking the instance metadata service."""
    env = os.environ if environ is None else environ
    if env.get("AWS_ACCESS_KEY_ID") or env.get("AWS_PROFILE") or env.get("AWS_WEB_IDENTITY_TOKEN_FILE"):
        return True
    if env.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") or env.get("AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        return True
    aws_dir = (home or Path.home()) / ".aws"
    files = [env.get("AWS_SHARED_CREDENTIALS_FILE") or aws_dir / "credentials", env.get("AWS_CONFIG_FILE") or aws_dir / "config"]
    return any(Path(f).is_file() for f in files)


def check_endpoint_url(url: str, where: str) -> None:
    """An endpoint is an http(s)://host[:port][/path] URL; botocore would fail later with a traceback."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError as e:
        raise S3EndpointError(f"{where}: {url!r} is not a URL: {e}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise S3EndpointError(f"{where}: {url!r} is not an http:// or https:// URL with a host")


def resolve_endpoint(
    flag: str | None,
    choice: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    credentials_present: Callable[[], bool] | None = None,
    embedded: Any = None,
) -> S3Endpoint:
    """The endpoint of the order above. `flag`: --s3-endpoint-url; `choice`: --s3 (else SDLOCAL_S3);
    `embedded`: the EmbeddedS3 to start (default: the one of SDLOCAL_HOME)."""
    env = os.environ if environ is None else environ
    has_credentials = credentials_present or (lambda: aws_credentials_present(env))
    where = "--s3"
    if choice is None and s3_choice(env) is not None:
        choice, where = s3_choice(env), S3
    if choice is not None and choice not in S3_CHOICES:
        raise S3EndpointError(f"{where}: {choice!r} is not one of {', '.join(S3_CHOICES)} "
                              "(an endpoint URL goes in --s3-endpoint-url)")
    if flag:
        if choice is not None:
            raise S3EndpointError(f"--s3-endpoint-url and {where} both choose the S3: give one")
        check_endpoint_url(flag, "--s3-endpoint-url")
        # LocalStack and moto take any credentials: a custom endpoint without any gets dummy ones
        return S3Endpoint(flag, "flag", dummy_credentials=not has_credentials())
    if choice == "aws":
        if not has_credentials():
            raise S3EndpointError(f"{where} aws: no AWS credentials found (environment, AWS_PROFILE, ~/.aws)")
        return S3Endpoint(None, "aws")
    if choice is None:
        for url, source in ((env.get("AWS_ENDPOINT_URL_S3"), "env"), (env.get("AWS_ENDPOINT_URL"), "env-global")):
            if url:
                check_endpoint_url(url, _SOURCES[source])
                return S3Endpoint(url, source, dummy_credentials=not has_credentials())
    if embedded is None:
        from sdlocal.launcher.s3.embedded import EmbeddedS3

        embedded = EmbeddedS3(sdlocal_home(env))
    server = embedded.ensure()
    return S3Endpoint(server.url, "embedded", dummy_credentials=True, unused_credentials=has_credentials())


def ensure_bucket(client: Any, bucket: str) -> None:
    """Create the bucket unless it exists (embedded/custom endpoints; never called for AWS)."""
    from sdlocal.trial.storage import S3Storage

    S3Storage(bucket, "", client=client).ensure_root()
