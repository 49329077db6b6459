"""A trial under an S3 prefix (any S3 endpoint: AWS, moto, MinIO, LocalStack)."""
from __future__ import annotations

import builtins
import http.client
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from sdlocal.trial.errors import StorageError
from sdlocal.trial.storage._base import Storage
from sdlocal.trial.storage._retry import GaveUp, Retry, client_config, error_code

T = TypeVar("T")


def _is_missing(err: BaseException) -> bool:
    code, status = error_code(err)
    return code in ("NoSuchKey", "404", "NotFound", "NoSuchBucket") or (not code and status == 404)


# Buckets that answered this process, per endpoint: one missing later is an endpoint that restarted
# empty (waited for), one never seen is a wrong name (missing at once). A few names per process.
_SEEN_BUCKETS: set[tuple[str, str]] = set()


# Below this size a file goes up in one PUT: s3transfer's managed upload (its default multipart
# threshold is the same 8 MiB) costs a thread pool per call, several times a small PUT on moto.
SINGLE_PUT_BYTES = 8 * 1024 * 1024
DELETE_BATCH = 1000  # DeleteObjects takes at most 1000 keys
_ALIGNMENT = 64  # as numpy's own large arrays (and LocalStorage's buffers)
# Bodies from this size on are read from http.client directly (the connection is then closed, not
# pooled: a new one costs far less than the copies of a large body; small values keep theirs)
DIRECT_BYTES = 1 << 20
LOCATE_BYTES = 4096  # what read_range's `locate` is given of a body: a record's layout unless its tag is huge


def _aligned(length: int, place: int | None) -> memoryview:
    """`length` bytes of fresh memory whose byte `place` (0 when None) lies on a 64-byte boundary."""
    raw: Any = np.empty(length + _ALIGNMENT, dtype=np.uint8)
    shift = -(raw.__array_interface__["data"][0] + (place or 0)) % _ALIGNMENT
    return memoryview(raw[shift: shift + length])


def _read_into(readinto: Callable[[memoryview], int], view: memoryview) -> int:
    """Fills `view` from a stream: how many bytes (fewer only at the stream's end)."""
    got = 0
    while got < len(view):
        n = readinto(view[got:])
        if not n:
            break
        got += n
    return got


def _http_response(body: Any) -> http.client.HTTPResponse | None:
    """The http.client response under a plain botocore body with a Content-Length, read from
    directly: urllib3 2's `readinto` reads a new bytes object and copies it into the buffer (two
    more passes over fresh memory per body, 3x the client's CPU time for 64 MiB bodies). None
    where the body is anything else (a checksum-validating body, chunked, another stack)."""
    from botocore.response import StreamingBody

    if type(body) is not StreamingBody:
        return None
    raw: Any = getattr(body, "_raw_stream", None)
    fp = getattr(raw, "_fp", None)
    if not isinstance(fp, http.client.HTTPResponse) or fp.chunked or fp.length is None:
        return None
    if getattr(raw, "_decoder", None) is not None or getattr(raw, "_fp_bytes_read", None):
        return None  # urllib3 decodes or has read already: it holds the stream's state
    return fp


def _check_complete(got: int, declared: int | None, length: int) -> None:
    """A body that ended before its Content-Length (a connection lost mid-body) is botocore's
    IncompleteReadError, which the retry policy tries again (as urllib3's reads raise it)."""
    if declared is not None and got < min(declared, length):
        from botocore.exceptions import IncompleteReadError

        raise IncompleteReadError(actual_bytes=got, expected_bytes=min(declared, length))


class S3Storage(Storage):
    """Keys under s3://bucket/prefix. `client` is a boto3 S3 client; without one, a client is made on
    first use with `endpoint_url` (None: boto3's own resolution, which honours AWS_ENDPOINT_URL_S3).
    Every call goes through `retry` (trial/storage/_retry.py: transient errors are tried again for
    up to 120 s); when it gives up, StorageError (FileNotFoundError for a missing key)."""

    fills_own_buffers = True  # read_range reads bodies into buffers of the reader's own
    cheap_small_reads = False  # one GET per value: no head read first to align its data

    def __init__(self, bucket: str, prefix: str = "", client: Any = None, endpoint_url: str | None = None,
                 retry: Retry | None = None) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self._client = client
        self._endpoint_url = endpoint_url
        self.retry = retry or Retry()

    @property
    def client(self) -> Any:
        if self._client is None:
            import boto3

            self._client = boto3.client("s3", endpoint_url=self._endpoint_url, config=client_config())
        return self._client

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"

    @property
    def outage_wait_s(self) -> float:
        return self.retry.policy.total_s

    @property
    def endpoint(self) -> str:
        return str(getattr(getattr(self.client, "meta", None), "endpoint_url", None) or "S3")

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _run(self, fn: Callable[[], T]) -> T:
        """`fn` (client calls) through the retry policy; GaveUp out of it carries the last error."""
        endpoint = self.endpoint
        seen = (endpoint, self.bucket)
        result = self.retry.run(endpoint, fn, bucket_seen=seen in _SEEN_BUCKETS, recreate=self._recreate)
        _SEEN_BUCKETS.add(seen)
        return result

    def _recreate(self) -> None:
        self._create_bucket()
        if self.retry.on_bucket_recreated is not None:
            self.retry.on_bucket_recreated(self.bucket)

    def _fail(self, what: str, e: GaveUp) -> StorageError:
        return StorageError(f"cannot {what}: {e}")

    def read(self, key: str, start: int | None = None, length: int | None = None) -> bytes:
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": self._key(key)}
        if length is not None:
            if length <= 0:
                return b""
            first = start or 0
            kwargs["Range"] = f"bytes={first}-{first + length - 1}"
        elif start:
            kwargs["Range"] = f"bytes={start}-"
        return self._get(key, kwargs, lambda body: bytes(body.read()), b"")

    def read_range(self, key: str, start: int, length: int, aligned_at: int | None = None,
                   locate: Callable[[memoryview], int | None] | None = None) -> memoryview:
        """The body read straight into a buffer of our own (writable: values are views of it, never
        copied again; `aligned_at` placed on a 64-byte boundary), not into a bytes object that the
        decoder would then copy: a large value crossed fresh memory twice, the reader's slowest
        part on S3. Without `aligned_at`, `locate` is given the body's first LOCATE_BYTES and may
        say which byte to align, in the same GET (a second GET for them cost a request; a value
        left unaligned was copied). A short object gives a shorter view, which the caller reports."""
        if length <= 0:
            return memoryview(b"")
        kwargs = {"Bucket": self.bucket, "Key": self._key(key), "Range": f"bytes={start}-{start + length - 1}"}

        def fill(body: Any) -> memoryview:
            direct = _http_response(body) if length >= DIRECT_BYTES else None
            readinto = direct.readinto if direct is not None else getattr(body, "readinto", None)
            if readinto is None:  # an older botocore's body: read, then copy in once
                data = memoryview(body.read())[:length]
                place = aligned_at if aligned_at is not None or locate is None else locate(data[:LOCATE_BYTES])
                out = _aligned(length, place)
                out[:len(data)] = data
                return out if len(data) == length else out[:len(data)]
            declared = direct.length if direct is not None else None  # what the answer said it holds
            head, place = memoryview(b""), aligned_at
            if place is None and locate is not None and length > LOCATE_BYTES:
                head = memoryview(bytearray(LOCATE_BYTES))
                got = _read_into(readinto, head)
                if got < LOCATE_BYTES:  # the body ended within its head
                    _check_complete(got, declared, length)
                    return head[:got]
                place = locate(head)
            view = _aligned(length, place)
            view[:len(head)] = head
            got = len(head) + _read_into(readinto, view[len(head):])
            _check_complete(got, declared, length)
            return view if got == length else view[:got]

        return self._get(key, kwargs, fill, memoryview(b""))

    def _get(self, key: str, kwargs: dict[str, Any], consume: Callable[[Any], T], empty: T) -> T:
        """GetObject through the retry policy, its body given to `consume`; `empty` for a range past
        the end (InvalidRange)."""
        def get() -> T:  # the body's read is in the try: a connection lost mid-body is tried again
            body = self.client.get_object(**kwargs)["Body"]
            try:
                return consume(body)
            finally:
                body.close()

        try:
            return self._run(get)
        except GaveUp as e:
            if _is_missing(e.cause):
                raise FileNotFoundError(f"{self.uri}/{key}") from e.cause
            if "InvalidRange" in str(e.cause):
                return empty
            raise self._fail(f"read {self.uri}/{key}", e) from e.cause

    def write(self, key: str, data: bytes, *, if_absent: bool = False) -> None:
        """`if_absent`: only when no object has the key (S3's conditional PUT, If-None-Match: *);
        returns quietly when one has."""
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": self._key(key), "Body": data}
        if if_absent:
            kwargs["IfNoneMatch"] = "*"
        try:
            self._run(lambda: self.client.put_object(**kwargs))
        except GaveUp as e:
            if if_absent and error_code(e.cause)[0] in ("PreconditionFailed", "ConditionalRequestConflict"):
                return
            raise self._fail(f"write {self.uri}/{key}", e) from e.cause

    def exists(self, key: str) -> bool:
        try:
            self._run(lambda: self.client.head_object(Bucket=self.bucket, Key=self._key(key)))
        except GaveUp as e:
            if _is_missing(e.cause):
                return False
            raise self._fail(f"stat {self.uri}/{key}", e) from e.cause
        return True

    def list(self, prefix: str = "", start_after: str | None = None, *, include_tmp: bool = False) -> list[str]:
        full_prefix = self._key(prefix) if prefix else (f"{self.prefix}/" if self.prefix else "")
        first: dict[str, Any] = {"Bucket": self.bucket, "Prefix": full_prefix}
        if start_after is not None:
            first["StartAfter"] = self._key(start_after)
        cut = len(self.prefix) + 1 if self.prefix else 0

        def listing() -> builtins.list[str]:  # tried again whole: a restarted endpoint forgets tokens
            kwargs = dict(first)
            keys: builtins.list[str] = []
            while True:
                resp = self.client.list_objects_v2(**kwargs)
                for obj in resp.get("Contents", ()):
                    key = obj["Key"][cut:]
                    if include_tmp or not key.endswith(".tmp"):
                        keys.append(key)
                if not resp.get("IsTruncated"):
                    return keys
                kwargs["ContinuationToken"] = resp["NextContinuationToken"]

        try:
            keys = self._run(listing)
        except GaveUp as e:
            raise self._fail(f"list {self.uri}/{prefix}", e) from e.cause
        keys.sort()
        return keys

    def delete(self, key: str) -> None:
        try:
            self._run(lambda: self.client.delete_object(Bucket=self.bucket, Key=self._key(key)))
        except GaveUp as e:
            if not _is_missing(e.cause):
                raise self._fail(f"delete {self.uri}/{key}", e) from e.cause

    def write_file(self, key: str, path: str | Path) -> None:
        def put() -> None:  # opened again on each try: a body half sent is sent again from its start
            if os.path.getsize(path) < SINGLE_PUT_BYTES:
                with open(path, "rb") as body:
                    self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=body)
            else:  # multipart, streamed from disk
                self.client.upload_file(str(path), self.bucket, self._key(key))

        try:
            self._run(put)
        except GaveUp as e:
            raise self._fail(f"write {self.uri}/{key} from {path}", e) from e.cause

    def read_to_file(self, key: str, path: str | Path) -> None:
        try:  # ranged GETs for large objects
            self._run(lambda: self.client.download_file(self.bucket, self._key(key), str(path)))
        except GaveUp as e:
            if _is_missing(e.cause):
                raise FileNotFoundError(f"{self.uri}/{key}") from e.cause
            raise self._fail(f"read {self.uri}/{key} into {path}", e) from e.cause

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
        request = {"Objects": [{"Key": self._key(k)} for k in keys], "Quiet": True}
        try:
            resp = self._run(lambda: self.client.delete_objects(Bucket=self.bucket, Delete=request))
        except GaveUp as e:
            raise self._fail(f"delete {len(keys)} key(s) under {self.uri}", e) from e.cause
        errors = [e for e in resp.get("Errors", ()) if e.get("Code") != "NoSuchKey"]
        if errors:
            first = errors[0]
            raise StorageError(f"cannot delete {len(errors)} key(s) under {self.uri}, e.g. "
                               f"{first.get('Key')}: {first.get('Code')} {first.get('Message', '')}".rstrip())

    def any_key(self, prefix: str = "") -> bool:
        full_prefix = self._key(prefix) if prefix else (f"{self.prefix}/" if self.prefix else "")
        try:
            resp = self._run(lambda: self.client.list_objects_v2(Bucket=self.bucket, Prefix=full_prefix, MaxKeys=1))
        except GaveUp as e:
            raise self._fail(f"list {self.uri}/{prefix}", e) from e.cause
        return bool(resp.get("Contents"))

    def ensure_root(self) -> None:
        """Create the bucket unless it exists (embedded or custom endpoints: the caller decides)."""
        try:
            self._run(lambda: self.client.head_bucket(Bucket=self.bucket))
            return
        except GaveUp as e:
            if not _is_missing(e.cause):
                raise StorageError(f"cannot reach bucket {self.bucket}: {e}") from e.cause
        try:
            self._run(self._create_bucket)
        except GaveUp as e:
            raise StorageError(f"cannot create bucket {self.bucket}: {e}") from e.cause

    def _create_bucket(self) -> None:
        region = getattr(getattr(self.client, "meta", None), "region_name", None)
        kwargs: dict[str, Any] = {"Bucket": self.bucket}
        if region and region != "us-east-1":  # us-east-1 refuses a LocationConstraint naming itself
            kwargs["CreateBucketConfiguration"] = {"LocationConstraint": region}
        try:
            self.client.create_bucket(**kwargs)
        except Exception as e:  # noqa: BLE001 - ours already (a restart racing us, another sdlocal)
            if error_code(e)[0] not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                raise
