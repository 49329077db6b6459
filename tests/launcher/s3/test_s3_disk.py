"""The embedded S3 served from disk (launcher/s3/store.py, launcher/s3/moto_disk.py): it answers as
moto's in-memory server does, keeps nothing in memory, restarts with its data without loading it,
and `sdlocal s3 status` / `sdlocal jobs rm | prune` show and delete what old jobs stored."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from click.testing import CliRunner

from sdlocal.launcher.cli import cli
from sdlocal.launcher.s3.store import DiskStore
from tests.moto_process import MotoProcess

BUCKET = "sdlocal"


def _client(url: str) -> Any:
    return boto3.client("s3", endpoint_url=url, aws_access_key_id="t", aws_secret_access_key="t",
                        region_name="us-east-1", config=Config(retries={"max_attempts": 1}))


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def _session(client: Any) -> list[Any]:
    """What a job's clients do, and what each answer says (without times and request ids)."""
    seen: list[Any] = []
    client.create_bucket(Bucket=BUCKET)
    keys = ["a", "b/1", "b/2", "b/c/3", "d/4", "d/5/6", "z", "é/ü"]
    for i, key in enumerate(keys):
        client.put_object(Bucket=BUCKET, Key=key, Body=f"body {i}".encode() * (i + 1), Metadata={"n": str(i)},
                          ContentType="text/plain" if i % 2 else "application/x-thing")
    client.put_object(Bucket=BUCKET, Key="b/2", Body=b"replaced")
    client.delete_object(Bucket=BUCKET, Key="d/4")
    client.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": "z"}, {"Key": "never"}]})
    client.copy_object(Bucket=BUCKET, Key="copy", CopySource={"Bucket": BUCKET, "Key": "a"})
    part = b"0123456789abcdef" * (5 * 1024 * 1024 // 16)  # the same in both sessions: the same ETag
    upload = client.create_multipart_upload(Bucket=BUCKET, Key="big")["UploadId"]
    etags = [client.upload_part(Bucket=BUCKET, Key="big", UploadId=upload, PartNumber=n, Body=body)["ETag"]
             for n, body in ((1, part), (2, b"tail"))]
    client.complete_multipart_upload(Bucket=BUCKET, Key="big", UploadId=upload, MultipartUpload={
        "Parts": [{"ETag": e, "PartNumber": n} for n, e in enumerate(etags, 1)]})
    for key in ("a", "b/2", "copy", "é/ü"):
        got = client.get_object(Bucket=BUCKET, Key=key)
        seen.append((key, got["Body"].read(), got["Metadata"], got["ContentType"], got["ETag"], got["ContentLength"]))
    seen.append(client.get_object(Bucket=BUCKET, Key="big")["Body"].read() == part + b"tail")
    seen.append(client.get_object(Bucket=BUCKET, Key="b/c/3", Range="bytes=2-5")["Body"].read())
    seen.append(client.head_object(Bucket=BUCKET, Key="big")["ETag"])
    for kwargs in ({}, {"Prefix": "b/"}, {"Delimiter": "/"}, {"Prefix": "b/", "Delimiter": "/"}, {"Prefix": "d"},
                   {"StartAfter": "b/2"}, {"Prefix": "nothing/"}):
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, **kwargs, PaginationConfig={"PageSize": 2})
        seen.append([([(o["Key"], o["Size"], o["ETag"]) for o in p.get("Contents", [])],
                      [c["Prefix"] for c in p.get("CommonPrefixes", [])]) for p in pages])
    pages = client.get_paginator("list_objects").paginate(Bucket=BUCKET, PaginationConfig={"PageSize": 3})
    seen.append([[o["Key"] for o in p.get("Contents", [])] for p in pages])
    seen.append(sorted(client.list_objects_v2(Bucket=BUCKET, Delimiter="/", MaxKeys=1000).get("CommonPrefixes", []),
                       key=str))
    with pytest.raises(client.exceptions.NoSuchKey):
        client.get_object(Bucket=BUCKET, Key="d/4")
    try:
        client.delete_bucket(Bucket=BUCKET)
    except client.exceptions.ClientError as e:
        seen.append(e.response["Error"]["Code"])
    return seen


def test_the_disk_server_answers_as_moto_in_memory_and_keeps_it_across_restarts(tmp_path: Path) -> None:
    memory, disk = MotoProcess(), MotoProcess(data_dir=tmp_path / "data")
    memory.start()
    disk.start()
    try:
        expected = _session(_client(memory.url))
        assert _session(_client(disk.url)) == expected
        assert expected[-1] == "BucketNotEmpty"
        disk.kill()  # SIGKILL: what was answered is on disk
        disk.start()
        client = _client(disk.url)
        assert client.get_object(Bucket=BUCKET, Key="b/2")["Body"].read() == b"replaced"
        got = client.get_object(Bucket=BUCKET, Key="é/ü")
        assert (got["Metadata"], got["ContentType"]) == ({"n": "7"}, "text/plain")
        assert [o["Key"] for o in client.list_objects_v2(Bucket=BUCKET)["Contents"]] == \
            ["a", "b/1", "b/2", "b/c/3", "big", "copy", "d/5/6", "é/ü"]
    finally:
        memory.stop()
        disk.stop()


def test_objects_are_not_held_in_memory(tmp_path: Path) -> None:
    """120 MiB PUT and read back: the server's resident memory grows by less than half of it (moto
    in memory holds every object below 5 MiB in its process: all of it)."""
    disk = MotoProcess(data_dir=tmp_path / "data")
    disk.start()
    try:
        assert disk.proc is not None
        client = _client(disk.url)
        client.create_bucket(Bucket=BUCKET)
        client.put_object(Bucket=BUCKET, Key="warm-up", Body=b"x" * 2 * 1024 * 1024)
        client.get_object(Bucket=BUCKET, Key="warm-up")["Body"].read()
        before = _rss_mib(disk.proc.pid)
        body = os.urandom(4 * 1024 * 1024)
        for i in range(30):
            client.put_object(Bucket=BUCKET, Key=f"jobs/j/{i}", Body=body)
        for i in range(30):
            assert client.get_object(Bucket=BUCKET, Key=f"jobs/j/{i}")["Body"].read() == body
        grown = _rss_mib(disk.proc.pid) - before
        # objects held in memory would add at least the 120 MiB (moto keeps every body); allocator
        # slack under load measured up to 64 MiB
        assert grown < 96, f"the server's memory grew by {grown:.0f} MiB for 120 MiB stored"
        stored = DiskStore(tmp_path / "data").usage(BUCKET, "jobs/j/")
        assert (stored.objects, stored.bytes) == (30, 120 * 1024 * 1024)
    finally:
        disk.stop()


def test_a_data_folder_of_the_layout_before_the_index_is_served(tmp_path: Path) -> None:
    """Files of the earlier store (bucket.json, objects with their header line) are indexed once."""
    data = tmp_path / "data"
    old = DiskStore(data)
    path = old.object_path(BUCKET, "jobs/j/old")
    path.parent.mkdir(parents=True)
    (data / "buckets" / BUCKET / "bucket.json").write_text(json.dumps(
        {"name": BUCKET, "region": "us-east-1", "account": "123456789012", "partition": "aws"}))
    header = {"key": "jobs/j/old", "metadata": {"Content-Type": "text/plain", "x-amz-meta-who": "old"},
              "etag": "0123456789abcdef0123456789abcdef", "last_modified": "2026-01-02T03:04:05+00:00"}
    path.write_bytes(json.dumps(header).encode() + b"\nold bytes")
    disk = MotoProcess(data_dir=data)
    disk.start()
    try:
        got = _client(disk.url).get_object(Bucket=BUCKET, Key="jobs/j/old")
        assert got["Body"].read() == b"old bytes" and got["ETag"] == '"0123456789abcdef0123456789abcdef"'
        assert got["ContentType"] == "text/plain"
    finally:
        disk.stop()


def _job(home: Path, store: DiskStore, name: str, age_days: float, s3: str = "embedded", objects: int = 2) -> None:
    folder = home / "jobs" / name
    folder.mkdir(parents=True)
    (folder / ".sdlocal-job").touch()
    (folder / "job.json").write_text(json.dumps({
        "TrainingJobName": name, "DebugOutput": f"s3://{BUCKET}/jobs/{name}/debug-output", "S3EndpointSource": s3,
        "DebugRules": [{"RuleConfigurationName": "Loss", "RuleOutput": f"s3://{BUCKET}/jobs/{name}/rule-output/Loss"}],
        "ModelArtifacts": {"S3ModelArtifacts": f"s3://{BUCKET}/jobs/{name}/output/model.tar.gz"}}))
    then = time.time() - age_days * 86400
    for p in (folder / "job.json", folder):
        os.utime(p, (then, then))
    for i in range(objects):
        store.save_object(BUCKET, f"jobs/{name}/debug-output/{i}", b"x" * 100, "e" * 32, "2026-01-01T00:00:00+00:00", {})


def test_status_shows_each_job_and_rm_and_prune_delete_old_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sdlocal.launcher.job.registry import register

    monkeypatch.setenv("SDLOCAL_HOME", str(tmp_path))
    store = DiskStore(tmp_path / "s3-data")
    store.save_bucket(BUCKET, "us-east-1", "123456789012", "aws")
    _job(tmp_path, store, "old-job", 10)
    _job(tmp_path, store, "older-on-aws", 20, s3="aws")
    _job(tmp_path, store, "new-job", 0, objects=3)
    _job(tmp_path, store, "running-job", 30)
    _job(tmp_path, store, "jobs-a", 9)  # a job named as a folder of the layout: only its own objects
    store.save_object(BUCKET, "jobs/jobs-a-b/debug-output/0", b"y", "e" * 32, "2026-01-01T00:00:00+00:00", {})
    register(tmp_path, "running-job", tmp_path / "jobs" / "running-job")  # this test's process runs it
    run = CliRunner().invoke

    out = run(cli, ["s3", "status"]).output
    assert "(1 bucket(s), 12 object(s), 1.1 KB; kept across restarts)" in out
    assert "job old-job (10.0d old): 2 object(s), 200 bytes in s3://sdlocal/jobs/old-job/" in out
    assert "job new-job (" in out and "3 object(s), 300 bytes" in out
    assert "of no job in" in out and "3 object(s), 201 bytes" in out  # older-on-aws's and jobs-a-b's

    refused = run(cli, ["jobs", "rm", "running-job"])
    assert refused.exit_code == 1 and refused.output.strip().endswith(
        f"job running-job is running (pid {os.getpid()}): stop it first (sdlocal stop running-job)")
    unknown = run(cli, ["jobs", "rm", "no-such-job"])
    assert unknown.exit_code == 1 and "unknown job no-such-job: no job folder made by sdlocal at" in unknown.output
    assert run(cli, ["jobs", "prune", "--older-than", "a week"]).exit_code == 1

    dry = run(cli, ["jobs", "prune", "--older-than", "7d", "--dry-run"]).output
    assert "would remove job old-job" in dry and "kept job running-job: it is running" in dry
    assert (tmp_path / "jobs" / "old-job").is_dir() and store.usage().objects == 12

    out = run(cli, ["jobs", "prune", "--older-than", "7d"]).output
    assert "removed job old-job" in out and "2 object(s) (200 bytes) from the embedded S3" in out
    assert "removed job older-on-aws" in out and "its objects in its S3 (aws) kept" in out
    assert "removed job jobs-a" in out and "kept job running-job: it is running" in out
    left = sorted(p.name for p in (tmp_path / "jobs").iterdir())
    assert left == ["new-job", "running-job"]
    assert store.usage(BUCKET, "jobs/jobs-a-b/").objects == 1 and store.usage(BUCKET, "jobs/old-job/").objects == 0

    out = run(cli, ["jobs", "rm", "new-job"]).output
    assert "removed job new-job" in out and "3 object(s) (300 bytes)" in out
    assert store.usage().objects == 2 + 2 + 1  # running-job's, older-on-aws's (not the embedded S3's job) and jobs-a-b
