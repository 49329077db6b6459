"""The embedded S3's data on disk, where it is served from: object bodies are files, their names,
sizes, ETags and metadata one row each in a SQLite index. Nothing is loaded at start (the server
opens the index and creates its buckets), nothing is held in memory after a request: the server's
memory and start-up follow the current job, not the user's history (issue 26).

Why not moto's own means (read in moto 5.x): moto keeps S3 in memory only (and keeps every FakeKey it
ever made in `instances_tracked`). Its recorder replays every request at start; a pickle writes
the whole store each time. Here a PUT costs one file write and one index row, on disk before the
client gets its answer (a SIGKILL loses nothing acknowledged); a GET reads the file.

Layout under the data folder (`$SDLOCAL_HOME/s3-data`): `index.sqlite` (tables `buckets` and
`objects`), `buckets/<bucket>/objects/<h2>/<h>` (h: SHA-256 of the key): one line of JSON (key,
metadata, ETag, LastModified), then the bytes; the line makes a file readable without the index
(and is how a data folder written before the index is indexed once, at its first start).
Not kept: versions other than the latest, multipart uploads in progress, bucket configurations
(policies, versioning, CORS...), ACLs and tags. Without fsync: a power cut can lose the last
seconds; a crash of the server or a reboot does not.

Other processes (`sdlocal s3 status`, `sdlocal jobs rm`) open the same index (SQLite's WAL mode:
readers never wait) and may remove objects while the server runs: it reads the index per request.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("sdlocal.s3")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS buckets (name TEXT PRIMARY KEY, region TEXT, account TEXT, partition TEXT);
CREATE TABLE IF NOT EXISTS objects (bucket TEXT NOT NULL, key TEXT NOT NULL, size INTEGER NOT NULL,
    etag TEXT, modified TEXT, metadata TEXT, offset INTEGER NOT NULL, PRIMARY KEY (bucket, key)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS settings (name TEXT PRIMARY KEY, value TEXT);
"""


@dataclass(frozen=True)
class Usage:
    buckets: int
    objects: int
    bytes: int


@dataclass(frozen=True)
class StoredObject:
    """One index row: where the bytes are (`path`, from `offset`) and what S3 says of them."""
    bucket: str
    key: str
    size: int
    etag: str
    modified: str
    metadata: dict[str, str]
    root: Path
    offset: int

    @property
    def path(self) -> Path:
        return object_path(self.root, self.bucket, self.key)


def object_path(root: Path, bucket: str, key: str) -> Path:
    h = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
    return root / "buckets" / urllib.parse.quote(bucket, safe="") / "objects" / h[:2] / h


def after_prefix(prefix: str) -> str:
    """The least string greater than every string that starts with `prefix` ("" for "": none)."""
    while prefix and prefix[-1] == "\U0010ffff":
        prefix = prefix[:-1]
    return prefix[:-1] + chr(ord(prefix[-1]) + 1) if prefix else ""


class DiskStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = threading.Lock()  # one connection, shared by the server's threads
        self._db: sqlite3.Connection | None = None

    # -- the index ---------------------------------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            self.root.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.root / "index.sqlite", timeout=30, isolation_level=None,
                                 check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")  # as the files: no fsync per write
            db.executescript(_SCHEMA)
            self._db = db
            self._index_old_layout()
        return self._db

    def _sql(self, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
        with self._lock:
            return self._conn().execute(sql, args).fetchall()

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def _bucket_dir(self, name: str) -> Path:
        return self.root / "buckets" / urllib.parse.quote(name, safe="")

    def object_path(self, bucket: str, key: str) -> Path:
        return object_path(self.root, bucket, key)

    # -- buckets -----------------------------------------------------------------------------------
    def buckets(self) -> list[dict[str, str]]:
        return [{"name": n, "region": r, "account": a, "partition": p or "aws"}
                for n, r, a, p in self._sql("SELECT name, region, account, partition FROM buckets ORDER BY name")]

    def save_bucket(self, name: str, region: str, account: str, partition: str) -> None:
        self._sql("INSERT OR REPLACE INTO buckets VALUES (?, ?, ?, ?)", (name, region, account, partition))

    def drop_bucket(self, name: str) -> None:
        import shutil

        self._sql("DELETE FROM objects WHERE bucket = ?", (name,))
        self._sql("DELETE FROM buckets WHERE name = ?", (name,))
        shutil.rmtree(self._bucket_dir(name), ignore_errors=True)

    # -- objects -----------------------------------------------------------------------------------
    def save_object(self, bucket: str, key: str, body: bytes | memoryview, etag: str, modified: str,
                    metadata: dict[str, str]) -> None:
        header = json.dumps({"key": key, "metadata": metadata, "etag": etag, "last_modified": modified}).encode() + b"\n"
        path = self.object_path(bucket, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
        with open(tmp, "wb") as f:
            f.write(header)
            f.write(body)
        with self._lock:  # the file and its row change together for readers of the index
            os.replace(tmp, path)
            self._conn().execute("INSERT OR REPLACE INTO objects VALUES (?, ?, ?, ?, ?, ?, ?)",
                                 (bucket, key, body.nbytes if isinstance(body, memoryview) else len(body), etag,
                                  modified, json.dumps(metadata), len(header)))

    def get(self, bucket: str, key: str) -> StoredObject | None:
        rows = self._sql("SELECT key, size, etag, modified, metadata, offset FROM objects WHERE bucket = ? AND key = ?",
                         (bucket, key))
        return self._row(bucket, rows[0]) if rows else None

    def has(self, bucket: str, key: str) -> bool:
        return bool(self._sql("SELECT 1 FROM objects WHERE bucket = ? AND key = ?", (bucket, key)))

    def count(self, bucket: str) -> int:
        return int(self._sql("SELECT count(*) FROM objects WHERE bucket = ?", (bucket,))[0][0])

    def drop_object(self, bucket: str, key: str) -> bool:
        """Whether there was one."""
        with self._lock:
            gone = self._conn().execute("DELETE FROM objects WHERE bucket = ? AND key = ?", (bucket, key)).rowcount
            self.object_path(bucket, key).unlink(missing_ok=True)
        return bool(gone)

    def scan(self, bucket: str, start: str = "", end: str | None = None, batch: int = 500) -> Iterator[StoredObject]:
        """The bucket's objects with start <= key < end, in key order (UTF-8 byte order, as S3's)."""
        first, inclusive = start, True
        while True:
            op = ">=" if inclusive else ">"
            sql = f"SELECT key, size, etag, modified, metadata, offset FROM objects WHERE bucket = ? AND key {op} ?"
            args: tuple[Any, ...] = (bucket, first)
            if end:
                sql, args = sql + " AND key < ?", (*args, end)
            rows = self._sql(sql + " ORDER BY key LIMIT ?", (*args, batch))
            yield from (self._row(bucket, r) for r in rows)
            if len(rows) < batch:
                return
            first, inclusive = rows[-1][0], False

    def _row(self, bucket: str, row: Any) -> StoredObject:
        key, size, etag, modified, metadata, offset = row
        return StoredObject(bucket, key, int(size), etag or "", modified or "", json.loads(metadata or "{}"),
                            self.root, int(offset))

    # -- what `sdlocal s3 status` and `sdlocal jobs rm` use ---------------------------------------------
    def usage(self, bucket: str | None = None, prefix: str = "") -> Usage:
        """Buckets, objects and bytes stored (in `bucket` under `prefix` when given)."""
        if not (self.root / "index.sqlite").exists() and not (self.root / "buckets").is_dir():
            return Usage(0, 0, 0)  # nothing stored: no folder made by looking
        if bucket is None:
            buckets = int(self._sql("SELECT count(*) FROM buckets")[0][0])
            n, size = self._sql("SELECT count(*), coalesce(sum(size), 0) FROM objects")[0]
            return Usage(buckets, int(n), int(size))
        sql = "SELECT count(*), coalesce(sum(size), 0) FROM objects WHERE bucket = ? AND key >= ?"
        args: tuple[Any, ...] = (bucket, prefix)
        if prefix:
            sql, args = sql + " AND key < ?", (*args, after_prefix(prefix))
        n, size = self._sql(sql, args)[0]
        return Usage(1, int(n), int(size))

    def remove_prefix(self, bucket: str, prefix: str) -> Usage:
        """Delete the bucket's objects under `prefix` (not ""): what was deleted."""
        if not prefix:
            raise ValueError("remove_prefix needs a prefix")
        gone = self.usage(bucket, prefix)
        for obj in list(self.scan(bucket, prefix, after_prefix(prefix))):
            self.drop_object(bucket, obj.key)
        return gone

    # -- a data folder written before the index (sdlocal <= this change) ---------------------------------
    def _index_old_layout(self) -> None:
        """Index, once, the files of a data folder that has none (called with the lock held)."""
        db = self._db
        assert db is not None
        if db.execute("SELECT 1 FROM settings WHERE name = 'indexed'").fetchall():
            return
        top = self.root / "buckets"
        count = 0
        for bdir in sorted(top.iterdir()) if top.is_dir() else ():
            try:
                info = json.loads((bdir / "bucket.json").read_text())
            except (OSError, ValueError):
                continue
            db.execute("INSERT OR REPLACE INTO buckets VALUES (?, ?, ?, ?)",
                       (info["name"], info["region"], str(info["account"]), info.get("partition") or "aws"))
            for path in (bdir / "objects").rglob("*"):
                if not path.is_file() or ".tmp-" in path.name:
                    continue
                with open(path, "rb") as f:
                    line = f.readline()
                header = json.loads(line)
                db.execute("INSERT OR REPLACE INTO objects VALUES (?, ?, ?, ?, ?, ?, ?)",
                           (info["name"], header["key"], path.stat().st_size - len(line), header.get("etag"),
                            header.get("last_modified"), json.dumps(header.get("metadata") or {}), len(line)))
                count += 1
        db.execute("INSERT OR REPLACE INTO settings VALUES ('indexed', '1')")
        if count:
            log.info("indexed %d object(s) stored before the index in %s", count, self.root)
