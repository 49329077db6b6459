"""One conformance suite for every Storage backend: a local directory and a real moto S3 server."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from trial.storage import LocalStorage, S3Storage, Storage, open_storage


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
    from trial.errors import StorageError
    from trial.storage import _s3

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
    from trial.storage import _s3

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
