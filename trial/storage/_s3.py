"""A trial under an S3 prefix (any S3 endpoint: AWS, moto, MinIO, LocalStack)."""
from __future__ import annotations

from typing import Any

from trial.errors import StorageError
from trial.storage._base import Storage


def _is_missing(err: Exception) -> bool:
    response = getattr(err, "response", None) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    return code in ("NoSuchKey", "404", "NotFound", "NoSuchBucket")


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

    def list(self, prefix: str = "", start_after: str | None = None) -> list[str]:
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
                    if not key.endswith(".tmp"):
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
