"""moto's S3 served from the disk store (launcher/s3/store.py): each bucket's `keys` (moto's
`_VersionedKeyStore`) becomes a `DiskKeys`, whose objects are rows of the index and files, made into
moto's FakeKeys when a request asks for them, their bytes read from the file (`DiskBody`).

What a request writes (put_object, which copy and multipart completion go through) stays in
memory until the request is done (moto sets user metadata and the content type after put_object);
`Persisting` (a WSGI wrapper around moto's app) then writes it to the store and lets it go, before
the answer leaves. Deletes go to the store at once. Listing reads the index in key order from the
prefix (moto's own lists every key of the bucket, sorts them, and keeps each continuation token
for ever). moto's `FakeKey.instances_tracked` (every FakeKey ever made, bodies included) is
emptied: it is what its dashboard shows, not what S3 serves. moto's dispatcher lists the folders of
its package (~170 stat calls) twice per request to route it: the list is made once.

A ranged GET reads only its range from the file: launcher/s3/moto_ranges.py.
"""
from __future__ import annotations

import base64
import datetime as _dt
import heapq
import io
import os
import threading
from collections.abc import Callable
from typing import Any

from sdlocal.launcher.s3.moto_ranges import install_ranges
from sdlocal.launcher.s3.store import DiskStore, StoredObject, after_prefix

# per request: what it wrote, [(DiskKeys, key name, FakeKey)], and the keys it read, {(bucket, name): FakeKey | None}
_local = threading.local()
_installed = False


class DiskBody:
    """A FakeKey's `_value_buffer` over its file: what moto reads (`seek`, `read`), nothing kept."""

    def __init__(self, obj: StoredObject) -> None:
        self.obj = obj
        self._pos = 0
        self._written: io.BytesIO | None = None  # moto set a new value on it: from then on, that

    def seek(self, pos: int, whence: int = 0) -> int:
        if self._written is not None:
            return self._written.seek(pos, whence)
        self._pos = pos if whence == 0 else (self._pos + pos if whence == 1 else self.obj.size + pos)
        return self._pos

    def tell(self) -> int:
        return self._written.tell() if self._written is not None else self._pos

    def read(self, n: int = -1) -> bytes:
        if self._written is not None:
            return self._written.read(n)
        with open(self.obj.path, "rb") as f:
            f.seek(self.obj.offset + self._pos)
            data = f.read(max(0, self.obj.size - self._pos) if n is None or n < 0 else min(n, self.obj.size - self._pos))
        self._pos += len(data)
        return data

    def truncate(self, size: int | None = None) -> int:
        self._written = io.BytesIO()
        return 0

    def write(self, data: bytes) -> int:
        if self._written is None:
            self.truncate()
        assert self._written is not None
        return self._written.write(data)

    def close(self) -> None:
        self._written = None


def _fake_key(obj: StoredObject, account: str, region: str) -> Any:
    from moto.s3.models import FakeKey

    key = FakeKey(obj.key, b"", account, region, etag=obj.etag or None, bucket_name=obj.bucket)
    key._value_buffer = DiskBody(obj)  # type: ignore[assignment]
    key.contentsize = obj.size
    key.set_metadata(dict(obj.metadata))
    if obj.modified:
        key.last_modified = _dt.datetime.fromisoformat(obj.modified)
    return key


def _base_store() -> type:
    from moto.s3.utils import _VersionedKeyStore

    return _VersionedKeyStore  # type: ignore[no-any-return]


class DiskKeys(_base_store()):  # type: ignore[misc]
    """A bucket's keys: its latest versions in the store; the dict itself holds only what requests
    in flight wrote (name -> [FakeKey])."""

    def __init__(self, store: DiskStore, bucket: str, account: str, region: str) -> None:
        super().__init__()
        self.store = store
        self.bucket = bucket
        self.account = account
        self.region = region

    def __sgetitem__(self, name: str) -> list[Any]:
        pending = dict.get(self, name)
        if pending:
            return pending  # type: ignore[no-any-return]
        seen = getattr(_local, "loaded", None)  # moto looks a key up several times per request
        if seen is not None and (self.bucket, name) in seen:
            key = seen[(self.bucket, name)]
        else:
            obj = self.store.get(self.bucket, name)
            key = None if obj is None else _fake_key(obj, self.account, self.region)
            if seen is not None:
                seen[(self.bucket, name)] = key
        if key is None:
            raise KeyError(name)
        return [key]

    def _forget(self, name: str) -> None:
        seen = getattr(_local, "loaded", None)
        if seen is not None:
            seen.pop((self.bucket, name), None)

    def __setitem__(self, name: str, value: Any) -> None:
        self.setlist(name, [value])

    def setlist(self, name: str, list_: Any) -> None:
        versions = list(list_) if isinstance(list_, (list, tuple)) else [list_]
        latest = versions[-1] if versions else None
        if latest is None or not hasattr(latest, "value"):  # a delete marker: the object is gone
            self.pop(name, missing_ok=True)
            return
        dict.__setitem__(self, name, [latest])
        self._forget(name)
        touched = getattr(_local, "touched", None)
        if touched is None:  # not in a request (Persisting): to the store now
            self.flush(name, latest)
        else:
            touched.append((self, name, latest))

    def flush(self, name: str, key: Any) -> None:
        """Write what a request put, as moto holds it once the request is done, and let it go."""
        if dict.get(self, name) != [key]:
            return  # a later request replaced or deleted it: that one writes
        inner = getattr(getattr(key, "_value_buffer", None), "_file", None)  # moto's SpooledTemporaryFile's
        body = inner.getbuffer() if isinstance(inner, io.BytesIO) else key.value  # no copy of what is in memory
        try:
            self.store.save_object(self.bucket, name, body, key.etag.strip('"'), key.last_modified.isoformat(),
                                   dict(key.metadata))
        finally:
            if isinstance(body, memoryview):
                body.release()
        if dict.get(self, name) == [key]:
            dict.pop(self, name, None)

    def pop(self, name: str, missing_ok: bool = False) -> None:  # type: ignore[override]
        pending = dict.pop(self, name, None)
        self._forget(name)
        stored = self.store.drop_object(self.bucket, name)
        if not (pending or stored or missing_ok):
            raise KeyError(name)

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        try:
            self.__sgetitem__(name)
        except KeyError:
            return False
        return True

    def __len__(self) -> int:
        return self.store.count(self.bucket) + sum(1 for n in self._in_flight() if not self.store.has(self.bucket, n))

    def _in_flight(self) -> dict[str, list[Any]]:
        """What requests in flight wrote: name -> [FakeKey]."""
        return dict(dict.items(self))

    def __bool__(self) -> bool:
        return len(self) > 0

    def __iter__(self) -> Any:
        return iter(self._self_iterable())

    def _self_iterable(self) -> dict[str, Any]:
        """Every key (moto's rare whole-bucket walks: versions, reset, metrics)."""
        every: dict[str, Any] = {o.key: [_fake_key(o, self.account, self.region)] for o in self.store.scan(self.bucket)}
        every.update(self._in_flight())
        return every

    def item_size(self) -> int:
        return self.store.usage(self.bucket).bytes

    # -- listing -----------------------------------------------------------------------------------
    def walk(self, prefix: str, delimiter: str | None, after: str | None, limit: int | None) -> tuple[list[Any], bool]:
        """Keys (FakeKeys) and common prefixes (str) under `prefix` after `after`, in order, at most
        `limit` (None: all); and whether more follow."""
        found: list[Any] = []
        end = after_prefix(prefix) or None
        pending = sorted(((n, v[-1]) for n, v in self._in_flight().items() if n.startswith(prefix)), key=lambda t: t[0])
        start, strict = (after, True) if after and after >= prefix else (prefix, False)
        while True:
            folder = None
            for name, entry in self._merged(start, strict, end, pending):
                rest = name[len(prefix):]
                if delimiter and delimiter in rest:
                    folder = prefix + rest.split(delimiter)[0] + delimiter
                    if not after or folder > after:
                        found.append(folder)
                    break
                found.append(_fake_key(entry, self.account, self.region) if isinstance(entry, StoredObject) else entry)
                if limit is not None and len(found) > limit:
                    break
            if limit is not None and len(found) > limit:
                return found[:limit], True
            if folder is None:
                return found, False
            start, strict = after_prefix(folder), False  # the rest of the folder is that one entry

    def _merged(self, start: str, strict: bool, end: str | None, pending: list[tuple[str, Any]]) -> Any:
        """(name, StoredObject or an in-flight FakeKey) from `start` in name order, in-flight first."""
        stored = ((o.key, o) for o in self.store.scan(self.bucket, start, end) if not (strict and o.key == start))
        extra = [(n, k) for n, k in pending if (n > start if strict else n >= start) and (end is None or n < end)]
        last = None
        for name, entry in heapq.merge(extra, stored, key=lambda t: t[0]):
            if name != last:
                last = name
                yield name, entry


def _name(item: Any) -> str:
    return item if isinstance(item, str) else str(item.name)


def _token(name: str) -> str:
    return base64.urlsafe_b64encode(name.encode("utf-8", "surrogatepass")).decode()


def _untoken(token: str) -> str:
    try:
        return base64.urlsafe_b64decode(token.encode()).decode("utf-8", "surrogatepass")
    except (ValueError, UnicodeError):
        return token


def list_objects(original: Callable[..., Any]) -> Callable[..., Any]:
    def method(self: Any, bucket: Any, prefix: str | None, delimiter: str | None, marker: str | None,
               max_keys: int | None) -> Any:
        if not isinstance(bucket.keys, DiskKeys):
            return original(self, bucket, prefix, delimiter, marker, max_keys)
        found, truncated = bucket.keys.walk(prefix or "", delimiter, marker, max_keys)
        keys = [k for k in found if not isinstance(k, str)]
        folders = [k for k in found if isinstance(k, str)]
        return keys, folders, truncated, (_name(found[-1]) if truncated and found else None)

    return method


def list_objects_v2(original: Callable[..., Any]) -> Callable[..., Any]:
    def method(self: Any, bucket: Any, prefix: str | None, delimiter: str | None, continuation_token: str | None,
               start_after: str | None, max_keys: int) -> Any:
        if not isinstance(bucket.keys, DiskKeys):
            return original(self, bucket, prefix, delimiter, continuation_token, start_after, max_keys)
        after = _untoken(continuation_token) if continuation_token else start_after
        if max_keys == 0:
            return [], False, None
        found, truncated = bucket.keys.walk(prefix or "", delimiter, after, max_keys)
        return found, truncated, (_token(_name(found[-1])) if truncated and found else None)

    return method


class _Untracked(list):  # type: ignore[type-arg]
    """moto's list of every FakeKey made, kept empty."""

    def append(self, item: Any) -> None:
        pass


def _untrack() -> None:
    from moto.s3.models import FakeKey, FakeMultipart

    for model in (FakeKey, FakeMultipart):
        if not isinstance(getattr(model, "instances_tracked", None), _Untracked):  # a /moto-api/reset makes a new list
            setattr(model, "instances_tracked", _Untracked())  # noqa: B010 - moto's metaclass adds it


def install_hooks(store: DiskStore) -> None:
    """moto's S3Backend keeps its buckets' keys in `store` (once per process)."""
    global _installed
    if _installed:
        return
    from moto.s3.models import S3Backend

    create, delete = S3Backend.create_bucket, S3Backend.delete_bucket

    def create_bucket(self: Any, bucket_name: str, region_name: str, *args: Any, **kwargs: Any) -> Any:
        bucket = create(self, bucket_name, region_name, *args, **kwargs)
        if not isinstance(bucket.keys, DiskKeys):
            bucket.keys = DiskKeys(store, bucket.name, self.account_id, region_name)
            store.save_bucket(bucket.name, region_name, self.account_id, self.partition)
        return bucket

    def delete_bucket(self: Any, bucket_name: str) -> Any:
        bucket = delete(self, bucket_name)
        if bucket is not None:
            store.drop_bucket(bucket_name)
        return bucket

    import moto.backends

    modules = tuple(moto.backends.list_of_moto_modules())  # moto lists its package folder twice a request
    setattr(moto.backends, "list_of_moto_modules", lambda: modules)  # noqa: B010
    for name, method in (("create_bucket", create_bucket), ("delete_bucket", delete_bucket),
                         ("list_objects", list_objects(S3Backend.list_objects)),
                         ("list_objects_v2", list_objects_v2(S3Backend.list_objects_v2))):
        setattr(S3Backend, name, method)
    if os.environ.get("SDLOCAL_S3_WHOLE_RANGES") != "1":
        install_ranges(lambda body: isinstance(body, DiskBody) and body._written is None, _local)
    _untrack()
    _installed = True


def open_buckets(store: DiskStore, backends: Callable[[str, str], Any]) -> int:
    """The stored buckets into moto (`backends(account, partition)`: its S3Backend): their objects
    stay on disk. How many."""
    buckets = store.buckets()
    for info in buckets:
        backend = backends(info["account"], info["partition"])
        if info["name"] not in backend.buckets:
            backend.create_bucket(info["name"], info["region"])
    return len(buckets)


class Persisting:
    """WSGI: the app's answer, once what the request wrote is in the store."""

    def __init__(self, app: Any, log: Any) -> None:
        self.app = app
        self.log = log

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        _untrack()
        _local.touched = []
        _local.loaded = {}
        try:
            result = self.app(environ, start_response)
            for keys, name, key in _local.touched:
                try:
                    keys.flush(name, key)
                except OSError as e:  # a full disk: the object stays in memory; say it where it is seen
                    self.log.error("the embedded S3 could not store %s: %s", environ.get("PATH_INFO"), e)
            return result
        finally:
            _local.touched = _local.loaded = None
