"""One conformance suite for every Storage backend: a local directory and a real moto S3 server."""
from __future__ import annotations

import gc
import os
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sdlocal.trial.storage import LocalStorage, S3Storage, Storage, open_storage
from sdlocal.trial.storage._handles import UNCACHED_READ_BYTES, FileHandles

needs_proc_fds = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts /proc/self/fd")


@pytest.fixture(params=["local", "s3"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
    if request.param == "local":
        return LocalStorage(tmp_path / "trial")
    s3_client = request.getfixturevalue("s3_client")
    bucket = request.getfixturevalue("bucket")
    return S3Storage(bucket, "jobs/job-1/debug-output", client=s3_client)


class TestStorageConformance:
    def test_write_read_ranged(self, storage: Storage) -> None:
        storage.write("events/000000000001/a.tfevents", b"0123456789")
        assert storage.read("events/000000000001/a.tfevents") == b"0123456789"
        assert storage.read("events/000000000001/a.tfevents", 3, 4) == b"3456"
        assert storage.read("events/000000000001/a.tfevents", 8) == b"89"
        assert storage.read("events/000000000001/a.tfevents", 0, 10) == b"0123456789"

    def test_missing_key(self, storage: Storage) -> None:
        with pytest.raises(FileNotFoundError):
            storage.read("nope.json")
        assert not storage.exists("nope.json")
        storage.delete("nope.json")

    def test_exists_delete(self, storage: Storage) -> None:
        storage.write("training_job_end.ts", b"")
        assert storage.exists("training_job_end.ts")
        assert storage.read("training_job_end.ts") == b""
        storage.delete("training_job_end.ts")
        assert not storage.exists("training_job_end.ts")

    def test_list_sorted_with_prefix_and_start_after(self, storage: Storage) -> None:
        keys = [f"index/{s // 1000:09d}/{s:012d}_worker_{w}.json" for s in (5, 999, 1000, 2001) for w in (0, 1)]
        for k in reversed(keys):
            storage.write(k, b"{}")
        storage.write("collections/000000000/worker_0_collections.json", b"{}")
        assert storage.list("index/") == sorted(keys)
        assert storage.list("index/", start_after=keys[3]) == sorted(keys)[4:]
        assert storage.list("index/", start_after=keys[-1]) == []
        assert storage.list("collections/") == ["collections/000000000/worker_0_collections.json"]
        assert len(storage.list()) == len(keys) + 1
        assert storage.list("index/000000001/") == keys[4:6]

    def test_tmp_keys_listed_only_when_asked(self, storage: Storage) -> None:
        storage.write("system/a.json", b"1")
        storage.write("system/b.json.tmp", b"2")  # e.g. a channel's file or a stray upload
        assert storage.list("system/") == ["system/a.json"]
        assert storage.list("system/", include_tmp=True) == ["system/a.json", "system/b.json.tmp"]
        assert storage.any_key("system/b") and not storage.any_key("framework/")

    def test_files_in_and_out(self, storage: Storage, tmp_path: Path) -> None:
        source = tmp_path / "model.tar.gz"
        source.write_bytes(bytes(range(256)) * 40)
        storage.write_file("output/model.tar.gz", source)
        assert storage.read("output/model.tar.gz") == source.read_bytes()
        target = tmp_path / "copy"
        storage.read_to_file("output/model.tar.gz", target)
        assert target.read_bytes() == source.read_bytes()
        with pytest.raises(FileNotFoundError):
            storage.read_to_file("output/none", tmp_path / "none")
        with pytest.raises(FileNotFoundError):
            storage.write_file("k", tmp_path / "no-such-file")

    def test_delete_many(self, storage: Storage) -> None:
        for key in ("a/1", "a/2", "a/3.tmp", "b/1"):
            storage.write(key, b"")
        storage.delete_many(storage.list("a/", include_tmp=True) + ["a/never-there"])
        assert storage.list(include_tmp=True) == ["b/1"]
        storage.delete_many([])

    def test_ensure_root_is_idempotent(self, storage: Storage) -> None:
        storage.ensure_root()
        storage.ensure_root()
        storage.write("k", b"v")
        assert storage.read("k") == b"v"

    def test_read_range_sees_writes_and_deletes(self, storage: Storage) -> None:
        storage.write("events/a.tfevents", b"0123456789")
        assert bytes(storage.read_range("events/a.tfevents", 2, 3)) == b"234"
        assert bytes(storage.read_range("events/a.tfevents", 8, 5)) == b"89"  # short at the end
        storage.write("events/a.tfevents", b"abcdefghij")  # replaced while the reader has read it
        assert bytes(storage.read_range("events/a.tfevents", 2, 3)) == b"cde"
        storage.delete("events/a.tfevents")
        with pytest.raises(FileNotFoundError):
            storage.read_range("events/a.tfevents", 2, 3)

    def test_overwrite_is_whole(self, storage: Storage) -> None:
        storage.write("k", b"first version, long")
        storage.write("k", b"second")
        assert storage.read("k") == b"second"
        assert storage.list() == ["k"]


def test_s3_list_paginates(s3_client: Any, bucket: str) -> None:
    for i in range(7):
        s3_client.put_object(Bucket=bucket, Key=f"p/index/{i:03d}.json", Body=b"")

    class SmallPages:
        """Forces pagination: every list_objects_v2 returns at most 2 keys."""

        def __getattr__(self, name: str) -> Any:
            return getattr(s3_client, name)

        def list_objects_v2(self, **kwargs: Any) -> Any:
            return s3_client.list_objects_v2(MaxKeys=2, **kwargs)

    st = S3Storage(bucket, "p", client=SmallPages())
    assert st.list("index/") == [f"index/{i:03d}.json" for i in range(7)]
    assert st.list("index/", start_after="index/002.json") == [f"index/{i:03d}.json" for i in range(3, 7)]


def test_open_storage(tmp_path: Path, moto_server: str, bucket: str) -> None:
    local = open_storage(tmp_path)
    assert isinstance(local, LocalStorage) and local.uri == str(tmp_path)
    s3 = open_storage(f"s3://{bucket}/a/b/", endpoint_url=moto_server)
    assert isinstance(s3, S3Storage) and s3.uri == f"s3://{bucket}/a/b"
    s3.write("x", b"1")  # the client is built from endpoint_url
    assert s3.read("x") == b"1"


def test_s3_ensure_root_creates_the_bucket_once(s3_client: Any) -> None:
    import uuid

    name = f"made-{uuid.uuid4().hex[:10]}"
    st = S3Storage(name, "jobs", client=s3_client)
    st.ensure_root()
    st.ensure_root()
    st.write("x", b"1")
    assert s3_client.get_object(Bucket=name, Key="jobs/x")["Body"].read() == b"1"


def test_s3_delete_many_batches_and_reports_failures(s3_client: Any, bucket: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from sdlocal.trial.errors import StorageError
    from sdlocal.trial.storage import _s3

    monkeypatch.setattr(_s3, "DELETE_BATCH", 2)
    calls: list[int] = []
    refuse = [False]

    class Counting:
        def __getattr__(self, name: str) -> Any:
            return getattr(s3_client, name)

        def delete_objects(self, **kwargs: Any) -> Any:
            calls.append(len(kwargs["Delete"]["Objects"]))
            if refuse[0]:
                return {"Errors": [{"Key": "p/k0", "Code": "AccessDenied", "Message": "no"}]}
            return s3_client.delete_objects(**kwargs)

    st = S3Storage(bucket, "p", client=Counting())
    for i in range(5):
        st.write(f"k{i}", b"")
    st.delete_many(f"k{i}" for i in range(5))
    assert calls == [2, 2, 1] and st.list() == []
    refuse[0] = True
    with pytest.raises(StorageError, match="AccessDenied"):
        st.delete_many(["k0"])


def test_s3_large_file_goes_through_the_managed_upload(tmp_path: Path, s3_client: Any, bucket: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from sdlocal.trial.storage import _s3

    monkeypatch.setattr(_s3, "SINGLE_PUT_BYTES", 1024)
    managed: list[str] = []

    class Spy:
        def __getattr__(self, name: str) -> Any:
            return getattr(s3_client, name)

        def upload_file(self, path: str, bucket: str, key: str) -> None:
            managed.append(key)
            s3_client.upload_file(path, bucket, key)  # s3transfer: multipart above its threshold

    small, big = tmp_path / "small", tmp_path / "big"
    small.write_bytes(b"s" * 100)
    big.write_bytes(b"x" * 5000)
    st = S3Storage(bucket, "p", client=Spy())
    st.write_file("small", small)
    st.write_file("big", big)
    assert managed == ["p/big"]  # the small one in one PUT
    assert s3_client.get_object(Bucket=bucket, Key="p/big")["Body"].read() == b"x" * 5000
    assert s3_client.get_object(Bucket=bucket, Key="p/small")["Body"].read() == b"s" * 100

def _open_fds(under: Path) -> int:
    """This process's descriptors open on files under `under` (other threads of the test process,
    left by earlier tests, open and close their own sockets and files at any time)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        count += target.startswith(f"{under}{os.sep}")
    return count


def _files(root: Path, n: int, size: int = 64) -> list[tuple[str, bytes]]:
    out = []
    for i in range(n):
        data = bytes((i + j) % 251 for j in range(size))
        (root / f"f{i}").write_bytes(data)
        out.append((str(root / f"f{i}"), data))
    return out


def _read(handles: FileHandles, path: str, offset: int, size: int) -> bytes:
    buf = np.empty(size, dtype=np.uint8)
    got = handles.read_into(1, path, buf, size, offset)
    return bytes(buf[:got])


@needs_proc_fds
def test_kept_descriptors_are_bounded_and_closed(tmp_path: Path) -> None:
    files = _files(tmp_path, 10)
    before = _open_fds(tmp_path)
    handles = FileHandles(capacity=3)
    for _ in range(3):  # cycling through more files than the capacity: every read still right
        for path, data in files:
            assert _read(handles, path, 5, 20) == data[5:25]
    assert len(handles) == 3 and _open_fds(tmp_path) == before + 3
    assert _read(handles, files[0][0], 60, 20) == files[0][1][60:]  # short at the end of the file
    handles.close()
    assert len(handles) == 0 and _open_fds(tmp_path) == before


def test_reading_every_value_cycles_through_files_and_still_hits(tmp_path: Path) -> None:
    """Tensor by tensor over a trial with more events files than kept descriptors: evicting the
    least recently used (or oldest) one would reopen a file for every read; most reads hit here."""
    files = _files(tmp_path, 10)
    handles = FileHandles(capacity=6, seed=0)
    reads = 0
    for _ in range(30):
        for path, data in files:
            assert _read(handles, path, 3, 4) == data[3:7]
            reads += 1
    assert handles.opened < 0.6 * reads


def test_files_no_longer_read_give_up_their_descriptors(tmp_path: Path) -> None:
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    old, new = _files(tmp_path / "old", 6), _files(tmp_path / "new", 4)
    handles = FileHandles(capacity=6, seed=0)
    for path, _ in old:  # an earlier trial fills the cache
        _read(handles, path, 0, 4)
    for _ in range(100):
        for path, data in new:
            assert _read(handles, path, 0, 4) == data[:4]
    opened = handles.opened
    for _ in range(20):  # by now the new trial's files all have a descriptor
        for path, _ in new:
            _read(handles, path, 0, 4)
    assert handles.opened == opened


@needs_proc_fds
def test_storages_share_one_bounded_set_of_descriptors(tmp_path: Path) -> None:
    """Many trials opened (and dropped into reference cycles, as Trial objects are) never hold more
    descriptors than the shared capacity; close() lets go of one trial's."""
    handles = FileHandles(capacity=4, seed=0)
    before = _open_fds(tmp_path)
    storages = []
    for t in range(6):
        root = tmp_path / f"trial{t}"
        root.mkdir()
        files = _files(root, 3)
        storage = LocalStorage(root, handles=handles)
        for i, (_, data) in enumerate(files):
            assert bytes(storage.read_range(f"f{i}", 1, 8)) == data[1:9]
        storages.append(storage)
    assert len(handles) == 4 and _open_fds(tmp_path) == before + 4
    for storage in storages:
        storage.close()
    assert len(handles) == 0 and _open_fds(tmp_path) == before


def test_a_new_trial_never_reads_through_an_earlier_ones_descriptors(tmp_path: Path) -> None:
    """A job run again under the same name replaces the trial's files: a trial opened afterwards
    reads the new ones, even where an earlier trial of this process still holds the old ones open."""
    (tmp_path / "events").mkdir()
    (tmp_path / "events" / "a").write_bytes(b"old-contents")
    handles = FileHandles(capacity=8)
    earlier = LocalStorage(tmp_path, handles=handles)
    assert bytes(earlier.read_range("events/a", 0, 3)) == b"old"
    (tmp_path / "events" / "a.tmp").write_bytes(b"new-contents")
    os.replace(tmp_path / "events" / "a.tmp", tmp_path / "events" / "a")  # as a writer replaces files
    later = LocalStorage(tmp_path, handles=handles)
    assert bytes(later.read_range("events/a", 0, 3)) == b"new"
    # the earlier trial keeps reading the file it opened (its index describes that one)
    assert bytes(earlier.read_range("events/a", 0, 3)) == b"old"


@needs_proc_fds
def test_a_collected_storage_gives_its_descriptors_back(tmp_path: Path) -> None:
    _files(tmp_path, 4)
    handles = FileHandles(capacity=16)
    before = _open_fds(tmp_path)
    storage = LocalStorage(tmp_path, handles=handles)
    for i in range(3):
        storage.read_range(f"f{i}", 0, 4)
    assert _open_fds(tmp_path) == before + 3
    storage.trial_cycle = storage  # type: ignore[attr-defined]  # held by a cycle, as a Trial is
    del storage
    gc.collect()
    LocalStorage(tmp_path, handles=handles).read_range("f3", 0, 4)  # the next open closes them
    assert len(handles) == 1 and _open_fds(tmp_path) == before + 1


@needs_proc_fds
def test_large_reads_keep_no_descriptor(tmp_path: Path) -> None:
    big = tmp_path / "big"
    data = np.arange(UNCACHED_READ_BYTES // 4 + 10, dtype=np.int32).tobytes()
    big.write_bytes(data)
    handles = FileHandles(capacity=4)
    before = _open_fds(tmp_path)
    assert _read(handles, str(big), 4, UNCACHED_READ_BYTES) == data[4: 4 + UNCACHED_READ_BYTES]
    assert len(handles) == 0 and _open_fds(tmp_path) == before


def test_a_file_changed_in_place_is_read_as_it_is_now(tmp_path: Path) -> None:
    """A kept descriptor reads the file's current bytes (same inode: rewritten or truncated in place)."""
    [(path, data)] = _files(tmp_path, 1)
    handles = FileHandles(capacity=2)
    assert _read(handles, path, 0, 4) == data[:4]
    with open(path, "r+b") as f:
        f.write(b"XYZW")
    assert _read(handles, path, 0, 4) == b"XYZW"
    with open(path, "r+b") as f:
        f.truncate(2)
    assert _read(handles, path, 0, 4) == b"XY"
    os.unlink(path)
    with pytest.raises(FileNotFoundError):
        _read(FileHandles(capacity=2), path, 0, 4)


def test_concurrent_readers_get_their_own_bytes(tmp_path: Path) -> None:
    files = _files(tmp_path, 12, size=4096)
    handles = FileHandles(capacity=3)  # constant replacement while threads read
    errors: list[str] = []

    def reader(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(300):
            path, data = files[int(rng.integers(len(files)))]
            offset, size = int(rng.integers(0, 4000)), int(rng.integers(1, 96))
            if _read(handles, path, offset, size) != data[offset: offset + size]:
                errors.append(f"{path} {offset} {size}")

    threads = [threading.Thread(target=reader, args=(seed,)) for seed in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors and not any(t.is_alive() for t in threads)
    assert len(handles) <= 3
