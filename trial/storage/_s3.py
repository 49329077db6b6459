"""A trial under an S3 prefix (any S3 endpoint: AWS, moto, MinIO, LocalStack)."""
from __future__ import annotations

import builtins
import contextlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from trial.errors import StorageError
from trial.storage._base import Storage


def _is_missing(err: Exception) -> bool:
    response = getattr(err, "response", None) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    return code in ("NoSuchKey", "404", "NotFound", "NoSuchBucket")


# Below this size a file goes up in one PUT: s3transfer's managed upload (its default multipart
# threshold is the same 8 MiB) costs a thread pool per call, several times a small PUT on moto.
SINGLE_PUT_BYTES = 8 * 1024 * 1024
DELETE_BATCH = 1000  # DeleteObjects takes at most 1000 keys


class S3Storage(Storage):
    """Keys under s3://bucket/prefix. `client` is a boto3 S3 client; without one, a client is made on
    first use with `endpoint_url` (None: boto3's own resolution, which honours AWS_ENDPOINT_URL_S3)."""

    def __init__(self, bucket: str, prefix: str = "", client: Any = None, endpoint_url: str | None = None) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self._client = client
        self._endpoint_url = endpoint_url

    @property
    def client(self) -> Any:
        if self._client is None:
            import boto3

            self._client = boto3.client("s3", endpoint_url=self._endpoint_url)
        return self._client

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def read(self, key: str, start: int | None = None, length: int | None = None) -> bytes:
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": self._key(key)}
        if length is not None:
            if length <= 0:
                return b""
            first = start or 0
            kwargs["Range"] = f"bytes={first}-{first + length - 1}"
        elif start:
            kwargs["Range"] = f"bytes={start}-"
        try:
            body = self.client.get_object(**kwargs)["Body"]
            try:
                return bytes(body.read())
            finally:
                body.close()
        except Exception as e:
            if _is_missing(e):
                raise FileNotFoundError(f"{self.uri}/{key}") from e
            if "InvalidRange" in str(e):
                return b""
            raise StorageError(f"cannot read {self.uri}/{key}: {e}") from e

    def write(self, key: str, data: bytes) -> None:
        try:
            self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data)
        except Exception as e:
            raise StorageError(f"cannot write {self.uri}/{key}: {e}") from e

    def exists(self, key: str) -> bool:
        try:
            self.client.head_object(Bucket=self.bucket, Key=self._key(key))
        except Exception as e:
            if _is_missing(e):
                return False
            raise StorageError(f"cannot stat {self.uri}/{key}: {e}") from e
        return True

    def list(self, prefix: str = "", start_after: str | None = None, *, include_tmp: bool = False) -> list[str]:
        full_prefix = self._key(prefix) if prefix else (f"{self.prefix}/" if self.prefix else "")
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": full_prefix}
        if start_after is not None:
            kwargs["StartAfter"] = self._key(start_after)
        cut = len(self.prefix) + 1 if self.prefix else 0
        keys: list[str] = []
        try:
            while True:
                resp = self.client.list_objects_v2(**kwargs)
                for obj in resp.get("Contents", ()):
                    key = obj["Key"][cut:]
                    if include_tmp or not key.endswith(".tmp"):
                        keys.append(key)
                if not resp.get("IsTruncated"):
                    break
                kwargs["ContinuationToken"] = resp["NextContinuationToken"]
        except Exception as e:
            raise StorageError(f"cannot list {self.uri}/{prefix}: {e}") from e
        keys.sort()
        return keys

    def delete(self, key: str) -> None:
        try:
            self.client.delete_object(Bucket=self.bucket, Key=self._key(key))
        except Exception as e:
            if not _is_missing(e):
                raise StorageError(f"cannot delete {self.uri}/{key}: {e}") from e

    def write_file(self, key: str, path: str | Path) -> None:
        try:
            if os.path.getsize(path) < SINGLE_PUT_BYTES:
                with open(path, "rb") as body:
                    self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=body)
            else:  # multipart, streamed from disk
                self.client.upload_file(str(path), self.bucket, self._key(key))
        except FileNotFoundError:
            raise
        except Exception as e:
            raise StorageError(f"cannot write {self.uri}/{key} from {path}: {e}") from e

    def read_to_file(self, key: str, path: str | Path) -> None:
        try:
            self.client.download_file(self.bucket, self._key(key), str(path))  # ranged GETs for large objects
        except Exception as e:
            if _is_missing(e):
                raise FileNotFoundError(f"{self.uri}/{key}") from e
            raise StorageError(f"cannot read {self.uri}/{key} into {path}: {e}") from e

    def delete_many(self, keys: Iterable[str]) -> None:
        batch: builtins.list[str] = []
        for key in keys:
            batch.append(key)
            if len(batch) == DELETE_BATCH:
                self._delete_batch(batch)
                batch = []
        if batch:
            self._delete_batch(batch)

    def _delete_batch(self, keys: builtins.list[str]) -> None:
        try:
            resp = self.client.delete_objects(
                Bucket=self.bucket, Delete={"Objects": [{"Key": self._key(k)} for k in keys], "Quiet": True})
        except Exception as e:
            raise StorageError(f"cannot delete {len(keys)} key(s) under {self.uri}: {e}") from e
        errors = [e for e in resp.get("Errors", ()) if e.get("Code") != "NoSuchKey"]
        if errors:
            first = errors[0]
            raise StorageError(f"cannot delete {len(errors)} key(s) under {self.uri}, e.g. "
                               f"{first.get('Key')}: {first.get('Code')} {first.get('Message', '')}".rstrip())

    def any_key(self, prefix: str = "") -> bool:
        full_prefix = self._key(prefix) if prefix else (f"{self.prefix}/" if self.prefix else "")
        try:
            resp = self.client.list_objects_v2(Bucket=self.bucket, Prefix=full_prefix, MaxKeys=1)
        except Exception as e:
            raise StorageError(f"cannot list {self.uri}/{prefix}: {e}") from e
        return bool(resp.get("Contents"))

    def ensure_root(self) -> None:
        """Create the bucket unless it exists (embedded or custom endpoints: the caller decides)."""
        try:
            self.client.head_bucket(Bucket=self.bucket)
            return
        except Exception as e:
            if not _is_missing(e):
                raise StorageError(f"cannot reach bucket {self.bucket}: {e}") from e
        region = getattr(getattr(self.client, "meta", None), "region_name", None)
        kwargs: dict[str, Any] = {"Bucket": self.bucket}
        if region and region != "us-east-1":  # us-east-1 refuses a LocationConstraint naming itself
            kwargs["CreateBucketConfiguration"] = {"LocationConstraint": region}
        try:
            with contextlib.suppress(self.client.exceptions.BucketAlreadyOwnedByYou):
                self.client.create_bucket(**kwargs)
        except Exception as e:
            raise StorageError(f"cannot create bucket {self.bucket}: {e}") from e
