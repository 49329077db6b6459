"""Ranged GETs of the embedded S3 served from disk (launcher/s3/moto_disk.py, `StoredRange`): the
same answers as moto's in-memory server (status, Content-Range, Content-Length, ETag, body, 416,
conditional headers), and only the range is read from the object's file."""
from __future__ import annotations

import http.client
import os
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from tests.moto_process import MotoProcess

BUCKET = "sdlocal"
HEADERS = ("content-range", "content-length", "etag", "accept-ranges", "content-type", "x-amz-meta-n")


def _client(url: str) -> Any:
    return boto3.client("s3", endpoint_url=url, aws_access_key_id="t", aws_secret_access_key="t",
                        region_name="us-east-1", config=Config(retries={"max_attempts": 1}))


def _get(server: MotoProcess, key: str, headers: dict[str, str], method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    """The raw answer to a request signed as boto3 signs it (a presigned URL; moto refuses anonymous ones)."""
    operation = "get_object" if method == "GET" else "head_object"
    url = _client(server.url).generate_presigned_url(operation, Params={"Bucket": BUCKET, "Key": key})
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.request(method, url[len(server.url):], headers=headers)
        resp = conn.getresponse()
        body = resp.read()
        got = {h: resp.getheader(h) for h in HEADERS if resp.getheader(h) is not None}
        if resp.status >= 400:  # an error's XML holds a request id of its own: its code is the answer
            body = body.split(b"<RequestId>")[0]
        return resp.status, got, body
    finally:
        conn.close()


def _answers(server: MotoProcess, body: bytes) -> list[Any]:
    client = _client(server.url)
    client.create_bucket(Bucket=BUCKET)
    client.put_object(Bucket=BUCKET, Key="obj", Body=body, Metadata={"n": "1"}, ContentType="text/plain")
    client.put_object(Bucket=BUCKET, Key="empty", Body=b"")
    etag = client.head_object(Bucket=BUCKET, Key="obj")["ETag"]
    cases: list[tuple[str, dict[str, str], str]] = [
        ("obj", {"Range": r}, "GET") for r in (
            "bytes=0-9", "bytes=10-", "bytes=-20", "bytes=290-400", "bytes=0-299", "bytes=299-299",
            "bytes=300-", "bytes=1000-2000", "bytes=-0", "bytes=5-2", "bytes=0-1,5-6", "bytes=abc", "bytes=-1000")]
    cases += [
        ("obj", {"Range": "bytes=3-7", "If-Match": etag}, "GET"),
        ("obj", {"Range": "bytes=3-7", "If-Match": '"0000"'}, "GET"),
        ("obj", {"Range": "bytes=3-7", "If-None-Match": etag}, "GET"),
        ("obj", {"Range": "bytes=3-7", "If-Modified-Since": "Sat, 01 Jan 2100 00:00:00 GMT"}, "GET"),
        ("obj", {"Range": "bytes=3-7", "If-Unmodified-Since": "Sat, 01 Jan 2000 00:00:00 GMT"}, "GET"),
        ("obj", {"Range": "bytes=3-7"}, "HEAD"),
        ("obj", {"Range": "bytes=400-"}, "HEAD"),
        ("obj", {}, "GET"),
        ("empty", {"Range": "bytes=0-0"}, "GET"),
        ("missing", {"Range": "bytes=0-0"}, "GET"),
    ]
    return [(key, headers, method, _get(server, key, headers, method)) for key, headers, method in cases]


def test_ranged_gets_answer_as_moto_in_memory(tmp_path: Path) -> None:
    body = os.urandom(300)
    memory, disk = MotoProcess(), MotoProcess(data_dir=tmp_path / "data")
    memory.start()
    disk.start()
    try:
        expected = _answers(memory, body)
        got = _answers(disk, body)
    finally:
        memory.stop()
        disk.stop()
    for want, have in zip(expected, got, strict=True):
        assert have == want
    by_range = {(h.get("Range"), m): a for _, h, m, a in expected if "If-Match" not in h and "If-None-Match" not in h}
    assert by_range[("bytes=10-", "GET")][:1] == (206,) and by_range[("bytes=10-", "GET")][2] == body[10:]
    assert by_range[("bytes=-20", "GET")][2] == body[-20:]
    assert by_range[("bytes=300-", "GET")][0] == 416


def _read_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError(f"no rchar for pid {pid}")


def test_a_ranged_get_reads_only_its_range(tmp_path: Path) -> None:
    """20 ranged GETs of 64 KiB from a 32 MiB object: the server reads about 1.3 MiB, not 640 MiB."""
    disk = MotoProcess(data_dir=tmp_path / "data")
    disk.start()
    try:
        assert disk.proc is not None
        client = _client(disk.url)
        client.create_bucket(Bucket=BUCKET)
        body = os.urandom(32 * 1024 * 1024)
        client.put_object(Bucket=BUCKET, Key="big", Body=body)
        before = _read_bytes(disk.proc.pid)
        for i in range(20):
            start = i * 1_600_003
            got = client.get_object(Bucket=BUCKET, Key="big", Range=f"bytes={start}-{start + 65535}")
            assert got["Body"].read() == body[start:start + 65536]
            assert got["ContentRange"] == f"bytes {start}-{start + 65535}/{len(body)}"
        read = _read_bytes(disk.proc.pid) - before
        assert read < 8 * 1024 * 1024, f"the server read {read / 2**20:.0f} MiB for 20 ranges of 64 KiB"
        # and a whole GET still reads the whole object
        assert client.get_object(Bucket=BUCKET, Key="big")["Body"].read() == body
    finally:
        disk.stop()
