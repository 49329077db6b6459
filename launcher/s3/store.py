"""The embedded S3's data on disk, so that it survives the server's restarts (`sdlocal s3 stop`, a
crash, a reboot): a write-through copy of every bucket and object of moto's S3 backend under
`$SDLOCAL_HOME/s3-data/`, loaded back into moto when the server starts.

Why this and not moto's own means (read in moto 5.x): moto keeps S3 in memory only. Its recorder
(`MOTO_ENABLE_RECORDING`) appends every request, reads and LISTs included, to one file, bodies in
base64, and replays them all at start: with evaluators polling every second it grows without end
and replays for ever longer. Pickling the backends (FakeKey supports it) writes the whole store
each time and loses what came after the last snapshot in a crash. A write-through copy of what
changed costs one file write per PUT or DELETE, is on disk before the client gets its answer (a
SIGKILL loses nothing acknowledged), and its start-up cost is reading what is stored.

How: moto's S3Backend methods that change a bucket or an object (create_bucket, delete_bucket,
put_object, which copy and multipart completion go through, delete_object, which DeleteObjects
goes through) note what they touched; `Persisting` (a WSGI wrapper around moto's app) writes the
noted buckets and objects, as moto holds them once the request is done (user metadata and the
content type are set after put_object), before it returns the answer.

Layout: `buckets/<bucket>/bucket.json` (name, region, account), `buckets/<bucket>/objects/<h2>/<h>`
(h: SHA-256 of the key): one line of JSON (key, metadata, ETag, LastModified), then the bytes.
Not kept: versions other than the latest, multipart uploads in progress, bucket configurations
(policies, versioning, CORS...), ACLs and tags. Without fsync: a power cut can lose the last
seconds; a crash of the server or a reboot does not.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import logging
import os
import threading
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("sdlocal.s3")

_local = threading.local()  # what the current request changed: [(backend, bucket, key or None)]
_installed = False


@dataclass(frozen=True)
class Usage:
    buckets: int
    objects: int
    bytes: int


class DiskStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = threading.Lock()

    def _bucket_dir(self, name: str) -> Path:
        return self.root / "buckets" / urllib.parse.quote(name, safe="")

    def _object_path(self, bucket: str, key: str) -> Path:
        h = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
        return self._bucket_dir(bucket) / "objects" / h[:2] / h

    @staticmethod
    def _write(path: Path, parts: Iterable[bytes]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
        with open(tmp, "wb") as f:
            f.writelines(parts)
        os.replace(tmp, path)

    # -- what the server writes -------------------------------------------------------------------
    def save_bucket(self, bucket: Any) -> None:
        info = {"name": bucket.name, "region": bucket.region_name, "account": bucket.account_id,
                "partition": getattr(bucket, "partition", "aws")}
        self._write(self._bucket_dir(bucket.name) / "bucket.json", [json.dumps(info).encode()])

    def drop_bucket(self, name: str) -> None:
        import shutil

        shutil.rmtree(self._bucket_dir(name), ignore_errors=True)

    def save_object(self, bucket: str, key: Any) -> None:
        header = {"key": key.name, "metadata": dict(key.metadata), "etag": key.etag.strip('"'),
                  "last_modified": key.last_modified.isoformat()}
        self._write(self._object_path(bucket, key.name), [json.dumps(header).encode(), b"\n", key.value])

    def drop_object(self, bucket: str, key: str) -> None:
        self._object_path(bucket, key).unlink(missing_ok=True)

    def flush(self, touched: list[tuple[Any, str, str | None]]) -> None:
        """Write what the request changed, as the backend holds it now."""
        with self._lock:  # one writer of a path at a time: the latest state is written last
            for backend, bucket_name, key_name in dict.fromkeys(touched):
                bucket = backend.buckets.get(bucket_name)
                if key_name is None:
                    if bucket is None:
                        self.drop_bucket(bucket_name)
                    else:
                        self.save_bucket(bucket)
                    continue
                key = bucket.keys.get(key_name) if bucket is not None else None
                if key is None or not hasattr(key, "value"):  # gone, or a delete marker
                    self.drop_object(bucket_name, key_name)
                else:
                    self.save_object(bucket_name, key)

    # -- what the server reads at start -----------------------------------------------------------
    def load(self, backends: Callable[[str, str], Any]) -> Usage:
        """Every stored bucket and object into moto (`backends(account, partition)`: its S3Backend)."""
        buckets = objects = size = 0
        top = self.root / "buckets"
        for bdir in sorted(top.iterdir()) if top.is_dir() else ():
            try:
                info = json.loads((bdir / "bucket.json").read_text())
            except (OSError, ValueError):
                log.warning("skipped %s: no readable bucket.json", bdir)
                continue
            backend = backends(str(info["account"]), str(info.get("partition") or "aws"))
            if info["name"] not in backend.buckets:
                backend.create_bucket(info["name"], info["region"])
            buckets += 1
            for path in (bdir / "objects").rglob("*"):
                if not path.is_file() or ".tmp-" in path.name:
                    continue
                with open(path, "rb") as f:
                    header = json.loads(f.readline())
                    value = f.read()
                key = backend.put_object(info["name"], header["key"], value, etag=header.get("etag"),
                                         disable_notification=True)
                key.set_metadata(dict(header.get("metadata") or {}))
                stamp = header.get("last_modified")
                if stamp:
                    key.last_modified = _dt.datetime.fromisoformat(stamp)
                objects += 1
                size += len(value)
        return Usage(buckets, objects, size)

    def usage(self) -> Usage:
        """Buckets, objects and bytes stored (`sdlocal s3 status`)."""
        buckets = objects = size = 0
        top = self.root / "buckets"
        for bdir in top.iterdir() if top.is_dir() else ():
            buckets += 1
            for path in (bdir / "objects").rglob("*"):
                if path.is_file() and ".tmp-" not in path.name:
                    objects += 1
                    with open(path, "rb") as f:  # the object's bytes, not its header line
                        size += path.stat().st_size - len(f.readline())
        return Usage(buckets, objects, size)


def _note(backend: Any, bucket: str, key: str | None) -> None:
    touched = getattr(_local, "touched", None)
    if touched is not None:
        touched.append((backend, bucket, key))


def install_hooks() -> None:
    """Make moto's S3Backend note what each request changes (once per process)."""
    global _installed
    if _installed:
        return
    from moto.s3.models import S3Backend

    def wrap(name: str, noted: Callable[..., tuple[str, str | None]]) -> None:
        original = getattr(S3Backend, name)

        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(self, *args, **kwargs)
            _note(self, *noted(*args, **kwargs))
            return result

        method.__name__ = name
        setattr(S3Backend, name, method)

    def bucket_only(bucket_name: str, *_: Any, **__: Any) -> tuple[str, str | None]:
        return bucket_name, None

    def bucket_key(bucket_name: str, key_name: str, *_: Any, **__: Any) -> tuple[str, str | None]:
        return bucket_name, key_name

    wrap("create_bucket", bucket_only)
    wrap("delete_bucket", bucket_only)
    wrap("put_object", bucket_key)
    wrap("delete_object", bucket_key)
    _installed = True


class Persisting:
    """WSGI: the app's answer, once what the request changed is on disk."""

    def __init__(self, app: Any, store: DiskStore) -> None:
        self.app = app
        self.store = store

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        _local.touched = []
        try:
            result = self.app(environ, start_response)
            if _local.touched:
                try:
                    self.store.flush(_local.touched)
                except OSError as e:  # a full disk: the data stays in memory; say it where it is seen
                    log.error("the embedded S3 could not store %s: %s", environ.get("PATH_INFO"), e)
            return result
        finally:
            _local.touched = None
