"""Reading profiler output while it is written: local folder and the moto S3 server."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sdlocal.trial.profiler import ProfilerReader, Sample, SystemMetricsWriter, TraceWriter
from sdlocal.trial.storage import LocalStorage, S3Storage, Storage

T0 = 1_700_000_000


class SpyStorage(Storage):
    """Delegates to another Storage and records the calls the reader makes."""

    def __init__(self, inner: Storage) -> None:
        self.inner = inner
        self.calls: list[tuple[str, ...]] = []

    @property
    def uri(self) -> str:
        return self.inner.uri

    def read(self, key: str, start: int | None = None, length: int | None = None) -> bytes:
        self.calls.append(("read", key))
        return self.inner.read(key, start, length)

    def write(self, key: str, data: bytes) -> None:
        self.inner.write(key, data)

    def exists(self, key: str) -> bool:
        self.calls.append(("exists", key))
        return self.inner.exists(key)

    def list(self, prefix: str = "", start_after: str | None = None) -> list[str]:
        self.calls.append(("list", prefix, str(start_after)))
        return self.inner.list(prefix, start_after)

    def delete(self, key: str) -> None:
        self.inner.delete(key)

    def reads(self) -> list[str]:
        return [c[1] for c in self.calls if c[0] == "read"]


class Job:
    """Writes a job's profiler-output locally and, for S3, uploads closed files as the platform does."""

    def __init__(self, root: Path, s3: tuple[Any, str, str] | None = None) -> None:
        self.root = root
        self.s3 = s3
        self.system = SystemMetricsWriter(root, close_interval_s=1)
        self.trace = TraceWriter(root, "0-algo-1", start_time_us=T0 * 1_000_000)
        self.uploaded: set[Path] = set()

    def second(self, s: int) -> None:
        """Two samples at second s, one step event; closes the previous second's files."""
        for half in (0.0, 0.5):
            self.system.write([Sample("cpu", "cpu0", "CPUUtilization", s + half),
                               Sample("gpu", "gpu0", "GPUUtilization", 50.0)], T0 + s + half)
        self.system.close_if_due(T0 + s + 1)
        self.trace.record_step("TRAIN", s, (T0 + s) * 1_000_000, (T0 + s) * 1_000_000 + 900_000)
        self.trace.flush()
        self.upload()

    def upload(self) -> None:
        if self.s3 is None:
            return
        client, bucket, prefix = self.s3
        for path in sorted(self.root.rglob("*")):
            if path.is_file() and not path.name.endswith(".tmp") and path not in self.uploaded:
                client.put_object(Bucket=bucket, Key=f"{prefix}/{path.relative_to(self.root).as_posix()}",
                                  Body=path.read_bytes())
                self.uploaded.add(path)

    def end(self) -> None:
        self.system.write_end_marker()
        self.trace.write_end_marker()
        self.upload()


def _follow(job: Job, storage: Storage) -> None:
    spy = SpyStorage(storage)
    reader = ProfilerReader(spy)
    assert reader.refresh().files == 0
    job.second(0)
    r = reader.refresh()
    assert (r.files, r.samples, r.events) == (2, 4, 1)
    for s in (1, 2):
        job.second(s)
    assert reader.refresh().samples == 8
    assert reader.framework.steps().step.tolist() == [0, 1, 2]
    assert reader.system.time_range() == (T0 * 1_000_000, (T0 + 2) * 1_000_000 + 500_000)

    spy.calls.clear()
    r = reader.refresh()  # nothing new: two LISTs, no GET, no HEAD
    assert r.files == 0 and [c[0] for c in spy.calls] == ["list", "list"]

    job.second(3)
    spy.calls.clear()
    reader.refresh()
    assert sorted(spy.reads()) == ["framework/pevents/2023111422/1700000003900000_0-algo-1_model_timeline.json",
                                   "system/incremental/2023111422/1700000003.algo-1.json"]
    assert not reader.training_ended() and not reader.loaded_all
    job.second(4)
    job.end()
    r = reader.refresh()
    assert r.samples == 4 and reader.training_ended() and reader.loaded_all
    cpu = reader.system.select(type="cpu")
    (series,) = cpu.values()
    assert series.values.tolist() == [s + h for s in range(5) for h in (0.0, 0.5)]
    assert reader.framework.steps().step.tolist() == [0, 1, 2, 3, 4]


def test_follow_a_local_job(tmp_path: Path) -> None:
    _follow(Job(tmp_path), LocalStorage(tmp_path))


def test_follow_a_job_on_s3(tmp_path: Path, s3_client: Any, bucket: str) -> None:
    _follow(Job(tmp_path, (s3_client, bucket, "out/job/profiler-output")),
            S3Storage(bucket, "out/job/profiler-output", client=s3_client))


def test_open_uri_forms(tmp_path: Path, s3_client: Any, bucket: str, moto_server: str) -> None:
    job = Job(tmp_path, (s3_client, bucket, "p/profiler-output"))
    job.second(0)
    job.end()
    local = ProfilerReader(str(tmp_path))
    remote = ProfilerReader(f"s3://{bucket}/p/profiler-output", endpoint_url=moto_server)
    for reader in (local, remote):
        reader.refresh()
        assert len(reader.system) == 4 and len(reader.framework) == 1 and reader.loaded_all


def test_late_files_are_read_by_the_next_deep_listing(tmp_path: Path) -> None:
    """Polls list after the newest key; every `deep_every`-th poll lists from `trailing_s` behind
    it, which finds a file that arrived after newer ones (another writer, a slow upload)."""
    spy = SpyStorage(LocalStorage(tmp_path))
    reader = ProfilerReader(spy, trailing_s=60, deep_every=3)
    w = SystemMetricsWriter(tmp_path, close_interval_s=1)
    for s in (0, 10, 100, 200):
        w.write([Sample("cpu", "cpu0", "CPUUtilization", 1.0)], T0 + s)
    w.close()
    reader.refresh()  # poll 1
    assert reader.system.nodes() == ["algo-1"]

    def arrive(node: str, second: int) -> None:
        late = SystemMetricsWriter(tmp_path / "staging", node_id=node, close_interval_s=1)
        late.write([Sample("cpu", "cpu0", "CPUUtilization", 7.0)], T0 + second)
        (path,) = [late.close()]
        assert path is not None
        path.rename(tmp_path / path.relative_to(tmp_path / "staging"))

    arrive("algo-2", 190)  # 10 s behind the newest file: within the trailing window
    arrive("algo-3", 5)  # 195 s behind: beyond it
    spy.calls.clear()
    reader.refresh()  # poll 2: after the newest key only, the late files are not listed
    newest = "system/incremental/2023111422/1700000200.algo-1.json"
    assert spy.calls[0] == ("list", "system/", newest) and reader.system.nodes() == ["algo-1"]
    spy.calls.clear()
    reader.refresh()  # poll 3: deep, from the newest key at least 60 s older than the newest
    assert spy.calls[0] == ("list", "system/", "system/incremental/2023111422/1700000100.algo-1.json")
    assert reader.system.nodes() == ["algo-1", "algo-2"]
    spy.calls.clear()
    reader.refresh()  # poll 4: back to after the newest key, nothing read twice
    assert spy.calls[0] == ("list", "system/", newest) and spy.reads() == []
    assert len(reader.system) == 5


@pytest.mark.parametrize("name", ["system/training_job_end.ts", "framework/training_job_end.ts"])
def test_either_end_marker_ends_training(tmp_path: Path, name: str) -> None:
    reader = ProfilerReader(tmp_path)
    reader.refresh()
    assert not reader.training_ended()
    (tmp_path / name).parent.mkdir(parents=True)
    (tmp_path / name).write_bytes(b"")
    assert reader.training_ended() and not reader.loaded_all
    reader.refresh()
    assert reader.loaded_all
