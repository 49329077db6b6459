"""Before training starts, as SageMaker does: the channels' data under `<job>/input/data/<channel>`
and an `s3://` source tarball (the SDK's sourcedir.tar.gz) unpacked into `<job>/code`.

S3 channels are downloaded (S3Prefix semantics of the SageMaker SDK's local mode: every object
whose key starts with the prefix, at its key relative to the prefix; a URI naming one object gives
that file). Local channels are not copied: the process runtime sees a symlink, the docker runtime
mounts the folder or file read-only.

A job of several hosts: each host has its own `input/data` (JobDir.host_dir). A channel whose
S3DataDistributionType is ShardedByS3Key gives each host its share of the objects (object i of
the sorted listing goes to host i mod N, as SageMaker gives each instance about 1/N of them); any
other channel is the same data on every host (downloaded once, the other hosts' folders link to it).

S3 is reached through trial's Storage: `s3` opens a bucket's storage (`bucket_storage(client)`).
"""
from __future__ import annotations

import shutil
import tarfile
import threading
import zlib
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from sdlocal.launcher import settings
from sdlocal.launcher.errors import JobError
from sdlocal.launcher.job import untar
from sdlocal.launcher.runtime import DataInput
from sdlocal.launcher.spec.inputs import Channel
from sdlocal.trial.errors import StorageError, one_line
from sdlocal.trial.storage import S3Storage, Storage

Buckets = Callable[[str], Storage]  # bucket name -> the storage at its root


def bucket_storage(client: Any) -> Buckets:
    """Storages at the root of each bucket, all over one client."""
    return lambda bucket: S3Storage(bucket, "", client=client)


def _bucket_key(uri: str) -> tuple[str, str]:
    """`s3://bucket/a/b/` -> ("bucket", "a/b/"): the key exactly as given (a prefix keeps its slash)."""
    bucket, _, key = uri[len("s3://"):].partition("/")
    return bucket, key



def is_sharded(channel: Channel, hosts: int) -> bool:
    return channel.is_s3 and channel.distribution == "ShardedByS3Key" and hosts > 1


def stage_channels(s3: Buckets | None, channels: tuple[Channel, ...], input_data: Path, *,
                   stop: threading.Event | None = None, echo: Callable[[str], None] = print,
                   shard: tuple[int, int] = (0, 1)) -> tuple[DataInput, ...]:
    """Make every channel available under `input_data/<channel>`; the runtimes' `DataInput`s.
    `shard`: (this host's index, hosts) for ShardedByS3Key channels."""
    inputs = []
    for channel in channels:
        dest = input_data / channel.name
        if channel.is_s3:
            if s3 is None:
                raise JobError(f"channel {channel.name}: {channel.source} needs S3")
            count = _download_prefix(s3, channel, dest, stop, shard if is_sharded(channel, shard[1]) else (0, 1))
            share = f" (ShardedByS3Key: host {shard[0] + 1} of {shard[1]})" if is_sharded(channel, shard[1]) else ""
            echo(f"Channel {channel.name}: {count} file(s) from {channel.source}{share}")
            inputs.append(DataInput(f"input/data/{channel.name}", dest))
            continue
        source = Path(channel.source)
        if not source.exists():
            raise JobError(f"channel {channel.name}: local data {source} does not exist")
        dest.parent.mkdir(parents=True, exist_ok=True)
        echo(f"Channel {channel.name}: {source} (local, not copied)")
        if source.is_dir():
            dest.symlink_to(source, target_is_directory=True)
            inputs.append(DataInput(f"input/data/{channel.name}", source))
        else:  # one file: the channel folder holds it
            dest.mkdir()
            (dest / source.name).symlink_to(source)
            inputs.append(DataInput(f"input/data/{channel.name}/{source.name}", source))
    return tuple(inputs)


def _download_prefix(s3: Buckets, channel: Channel, dest: Path, stop: threading.Event | None,
                     shard: tuple[int, int] = (0, 1)) -> int:
    bucket, prefix = _bucket_key(channel.source)
    storage = s3(bucket)
    dest.mkdir(parents=True, exist_ok=True)
    index, hosts = shard
    try:
        if prefix and not prefix.endswith("/") and storage.exists(prefix):
            if index % hosts == 0:  # one object: the first host's share
                storage.read_to_file(prefix, dest / PurePosixPath(prefix).name)
            return 1 if index % hosts == 0 else 0
        count = seen = 0
        for key in storage.list(prefix, include_tmp=True):  # a channel's data is whatever is there
            if key.endswith("/"):  # a "folder" placeholder object
                continue
            seen += 1
            if (seen - 1) % hosts != index:  # another host's share
                continue
            rel = untar.normalized_path(key[len(prefix):].lstrip("/"))  # None: it climbs out
            if not rel:
                raise JobError(f"channel {channel.name}: S3 key {key!r} would be written outside "
                               f"{dest}; refused")
            if stop is not None and stop.is_set():
                raise JobError(f"channel {channel.name}: stopped while downloading {channel.source}")
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            storage.read_to_file(key, target)
            count += 1
    except (StorageError, OSError) as e:  # S3 or this disk: name the channel and the URI
        raise JobError(f"channel {channel.name}: cannot download {channel.source}: {one_line(e)}") from e
    if seen == 0:
        raise JobError(f"channel {channel.name}: no S3 objects found under S3 URL {channel.source}")
    return count


def fetch_source(s3: Buckets, uri: str, dest: Path) -> None:
    """Download the gzipped tarball at `uri` and unpack it into `dest` (created), refusing members
    that would land outside it (absolute paths, `..`, links pointing out, devices)."""
    bucket, key = _bucket_key(uri)
    dest.mkdir(parents=True, exist_ok=True)
    archive = dest.parent / ".sourcedir.tar.gz.download"
    try:
        try:
            s3(bucket).read_to_file(key, archive)
        except FileNotFoundError as e:
            raise JobError(f"SourceDir {uri}: no such object in S3") from e
        except StorageError as e:
            raise JobError(f"SourceDir {uri}: cannot download: {one_line(e)}") from e
        _unpack(archive, dest, uri)
    finally:
        archive.unlink(missing_ok=True)


def _unpack(archive: Path, dest: Path, uri: str) -> None:
    try:
        members, size = settings.source_limits()
    except ValueError as e:
        raise JobError(f"SourceDir {uri}: {e}") from e
    try:
        with tarfile.open(archive, "r:gz") as tar:  # the training toolkit opens it so: gzip only
            untar.extract(tar, untar.read_members(tar, untar.Limits(members, size)), dest)
    except untar.UnsafeArchive as e:
        raise JobError(f"SourceDir {uri}: {e}") from e
    except (tarfile.TarError, EOFError, OSError, zlib.error) as e:
        raise JobError(f"SourceDir {uri}: not a readable gzipped tar archive (the SDK's sourcedir.tar.gz): "
                       f"{one_line(e)}") from e


def remove_staged(root: Path) -> None:
    """Undo a staging that failed: the job folder did not exist before (run_job's `_prepare`)."""
    shutil.rmtree(root, ignore_errors=True)


def stage_host_channels(s3: Buckets | None, channels: tuple[Channel, ...], first: tuple[DataInput, ...],
                        first_data: Path, input_data: Path, index: int, hosts: int, *,
                        stop: threading.Event | None = None,
                        echo: Callable[[str], None] = print) -> tuple[DataInput, ...]:
    """Host `index` (from 0; the first host's are `first`, under `first_data`): its share of the
    sharded S3 channels downloaded under `input_data`, the other channels linked to the first
    host's (the process runtime's view; docker mounts the same data)."""
    inputs: list[DataInput] = []
    for channel in channels:
        if is_sharded(channel, hosts):
            inputs += stage_channels(s3, (channel,), input_data, stop=stop, echo=echo, shard=(index, hosts))
            continue
        dest = input_data / channel.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.symlink_to(first_data / channel.name, target_is_directory=True)
        inputs += [d for d in first if d.rel == f"input/data/{channel.name}" or
                   d.rel.startswith(f"input/data/{channel.name}/")]
    return tuple(inputs)
