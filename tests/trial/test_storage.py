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
