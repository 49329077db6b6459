"""Where a trial lives: a local directory or an S3 prefix, behind one small interface."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from sdlocal.trial.storage._base import Storage
from sdlocal.trial.storage._local import LocalStorage
from sdlocal.trial.storage._retry import Retry, RetryPolicy, add_outage_listener, client_config
from sdlocal.trial.storage._s3 import S3Storage

__all__ = ["LocalStorage", "Retry", "RetryPolicy", "S3Storage", "Storage", "add_outage_listener", "client_config",
           "open_storage", "parse_s3_uri"]


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """("bucket", "prefix") of s3://bucket/prefix."""
    rest = uri[len("s3://") :]
    bucket, _, prefix = rest.partition("/")
    if not bucket:
        raise ValueError(f"no bucket in {uri!r}")
    return bucket, prefix.strip("/")


def open_storage(path_or_uri: str | Path | Storage, *, client: Any = None, endpoint_url: str | None = None,
                 retry: Retry | None = None) -> Storage:
    """`retry`: how S3 calls ride through outages (trial/storage/_retry.py; default: 120 s)."""
    if isinstance(path_or_uri, str) and path_or_uri.startswith("s3://"):
        bucket, prefix = parse_s3_uri(path_or_uri)
        return S3Storage(bucket, prefix, client=client, endpoint_url=endpoint_url, retry=retry)
    if isinstance(path_or_uri, Storage):
        return path_or_uri
    return LocalStorage(path_or_uri)
