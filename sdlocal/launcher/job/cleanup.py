"""Old jobs out of `$SDLOCAL_HOME`: a job's folder (`jobs/<job>`) and what it stored in the embedded
S3 (`sdlocal jobs rm`, `sdlocal jobs prune`), and what each job holds there (`sdlocal s3 status`).

A job's objects are found from its record (`job.json`): every `s3://` URI in it (DebugOutput, the
rules' outputs, the model) cut after the path segment that is the job's name (`s3://sdlocal/jobs/
<job>/debug-output` -> `jobs/<job>/` in bucket `sdlocal`: its profiler output, source upload and
outputs with it). Only a job whose record says it used the embedded S3 has objects removed there;
the objects of a job that used Amazon S3 or another endpoint are never touched."""
from __future__ import annotations

import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sdlocal.launcher.errors import JobError
from sdlocal.launcher.jobdir.folder import JobDir
from sdlocal.launcher.s3.store import DiskStore, Usage

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


@dataclass(frozen=True)
class StoredJob:
    name: str
    folder: Path
    age_s: float  # since its record (else its folder) last changed
    s3: str | None  # the record's S3EndpointSource: "embedded", "aws", "serve", a URL's source, or None
    prefixes: tuple[tuple[str, str], ...]  # (bucket, key prefix) its objects are under

    @property
    def in_embedded_s3(self) -> bool:
        return self.s3 == "embedded"


def parse_age(text: str) -> float:
    """`7d`, `12h`, `30m`, `90s`, `2w` -> seconds."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([smhdw])", text.strip())
    if not m:
        raise JobError(f"--older-than {text!r}: not an age such as 7d, 12h, 30m, 90s or 2w")
    return float(m.group(1)) * _UNITS[m.group(2)]


def _uris(value: Any) -> Iterator[str]:
    if isinstance(value, str) and value.startswith("s3://"):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _uris(v)
    elif isinstance(value, list):
        for v in value:
            yield from _uris(v)


def job_prefixes(name: str, record: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """(bucket, prefix) of the job's objects, from the S3 URIs of its record."""
    found: set[tuple[str, str]] = set()
    for uri in _uris(record):
        bucket, _, key = uri[len("s3://"):].partition("/")
        parts = key.strip("/").split("/")
        cut = max((i for i, p in enumerate(parts[:-1]) if p == name), default=None)
        if bucket and cut is not None:
            found.add((bucket, "/".join(parts[:cut + 1]) + "/"))
        elif bucket and key.strip("/"):
            found.add((bucket, key.strip("/") + "/"))
    # a prefix inside another of the same bucket is counted (and removed) once
    return tuple(sorted((b, p) for b, p in found
                        if not any(b == b2 and p != p2 and p.startswith(p2) for b2, p2 in found)))


def _read_job(folder: Path, now: float) -> StoredJob | None:
    from sdlocal.launcher.errors import JobError
    from sdlocal.launcher.job.record import read_record

    job_dir = JobDir(folder)
    if not folder.is_dir() or not job_dir.made_by_sdlocal():
        return None
    try:
        record = read_record(folder) or {}
    except JobError:  # a corrupt record: the folder is still the job's, its objects unknown
        record = {}
    changed = max((p.stat().st_mtime for p in (folder, job_dir.record) if p.exists()), default=now)
    return StoredJob(folder.name, folder, max(0.0, now - changed), record.get("S3EndpointSource"),
                     job_prefixes(folder.name, record))


def stored_jobs(home: Path, now: float | None = None) -> list[StoredJob]:
    """The jobs of `$SDLOCAL_HOME/jobs`, oldest first."""
    now = time.time() if now is None else now
    top = home / "jobs"
    jobs = [j for f in (sorted(top.iterdir()) if top.is_dir() else ()) if (j := _read_job(f, now)) is not None]
    return sorted(jobs, key=lambda j: -j.age_s)


def job_usage(store: DiskStore, job: StoredJob) -> Usage:
    """What the job holds in the embedded S3 (nothing when it used another S3)."""
    if not job.in_embedded_s3:
        return Usage(0, 0, 0)
    parts = [store.usage(bucket, prefix) for bucket, prefix in job.prefixes]
    return Usage(len({b for b, _ in job.prefixes}), sum(u.objects for u in parts), sum(u.bytes for u in parts))


@dataclass(frozen=True)
class Removed:
    job: StoredJob
    objects: int
    bytes: int


def remove_job(home: Path, name: str, store: DiskStore) -> Removed:
    """Delete the job's folder and its objects in the embedded S3; JobError for a job that runs or
    that has no folder sdlocal made."""
    from sdlocal.launcher.job.registry import find_running

    running = find_running(home, name)
    if running is not None:
        raise JobError(f"job {name} is running (pid {running.pid}): stop it first (sdlocal stop {name})")
    folder = home / "jobs" / name
    job = _read_job(folder, time.time())
    if job is None:
        raise JobError(f"unknown job {name}: no job folder made by sdlocal at {folder}")
    objects = size = 0
    if job.in_embedded_s3:
        for bucket, prefix in job.prefixes:
            gone = store.remove_prefix(bucket, prefix)
            objects, size = objects + gone.objects, size + gone.bytes
    shutil.rmtree(folder)
    return Removed(job, objects, size)
