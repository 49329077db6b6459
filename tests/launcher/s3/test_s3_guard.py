"""Only this machine's own clients drive the embedded S3 (launcher/s3/guard.py): a page's
cross-origin requests, a DNS-rebinding Host and preflights are refused, boto3 keeps working."""
from __future__ import annotations

import http.client
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import boto3
import pytest

from sdlocal.launcher.s3.embedded import EmbeddedS3
from sdlocal.launcher.s3.endpoint import ensure_bucket, resolve_endpoint
from sdlocal.launcher.s3.guard import GATEWAY_PORT, host_refusal, origin_refusal, split_host


@pytest.mark.parametrize(("host", "refused"), [
    ("127.0.0.1:9001", None), ("localhost:9001", None), ("[::1]:9001", None), ("bucket.localhost:9001", None),
    ("172.17.0.3:9000", None),  # a container through the docker runtime's S3 gateway
    ("LOCALHOST.:9001", None),
    ("attacker.example:9001", "is not a loopback address or name"),  # DNS rebinding
    ("127.0.0.1.nip.io:9001", "is not a loopback address or name"),
    ("localhost.attacker.example:9001", "is not a loopback address or name"),
    ("127.0.0.1:8888", "names another port"), ("127.0.0.1", "names another port"),
    ("127.0.0.1:x", "names another port"), ("", "without a Host header"),
])
def test_host_header_must_be_a_loopback_address_with_this_servers_port(host: str, refused: str | None) -> None:
    why = host_refusal(host, {9001, GATEWAY_PORT}, set())
    assert (why is None) if refused is None else (refused in (why or ""))


def test_allowed_hosts_setting_adds_names() -> None:
    assert host_refusal("gpu-box.lan:9001", {9001}, {"gpu-box.lan"}) is None
    assert split_host("[::1]:80") == ("::1", 80) and split_host("a") == ("a", None)


@pytest.mark.parametrize(("headers", "refused"), [
    ({}, False),
    ({"HTTP_ORIGIN": "http://127.0.0.1:9001"}, False),  # the endpoint's own origin
    ({"HTTP_ORIGIN": "http://127.0.0.1:8000"}, True),
    ({"HTTP_ORIGIN": "null"}, True),  # a sandboxed frame or a file:// page
    ({"HTTP_SEC_FETCH_SITE": "same-site"}, True), ({"HTTP_SEC_FETCH_SITE": "cross-site"}, True),
    ({"HTTP_SEC_FETCH_SITE": "none"}, False),  # typed in the address bar
])
def test_origin_must_be_the_endpoints_own(headers: dict[str, str], refused: bool) -> None:
    assert (origin_refusal({"HTTP_HOST": "127.0.0.1:9001", **headers}) is not None) is refused


@pytest.fixture
def embedded(tmp_path: Path) -> Iterator[str]:
    server = EmbeddedS3(tmp_path)
    endpoint = resolve_endpoint(None, environ={}, credentials_present=lambda: False, embedded=server)
    try:
        ensure_bucket(endpoint.client(), "sdlocal")
        endpoint.client().put_object(Bucket="sdlocal", Key="k", Body=b"v")
        yield str(endpoint.url)
    finally:
        server.stop()


def raw(url: str, method: str, path: str, headers: dict[str, str], body: bytes | None = None
        ) -> tuple[int, dict[str, str], bytes]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        conn.putrequest(method, path, skip_host="Host" in headers)
        for key, value in headers.items():
            conn.putheader(key, value)
        conn.putheader("Content-Length", str(len(body or b"")))
        conn.endheaders(body)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def test_the_embedded_s3_refuses_pages_and_rebinding_and_serves_boto3(embedded: str) -> None:
    port = urlsplit(embedded).port
    # an unsigned upload from a page at another origin (what a fetch() with mode "cors" sends)
    status, headers, body = raw(embedded, "PUT", "/sdlocal/train.py", {"Origin": "http://127.0.0.1:8000"}, b"x")
    assert status == 403 and b"<Code>AccessDenied</Code>" in body and b"web page origin" in body
    assert not any(k.startswith("access-control-") for k in headers)
    # its preflight
    status, headers, _ = raw(embedded, "OPTIONS", "/sdlocal/train.py", {
        "Origin": "http://127.0.0.1:8000", "Access-Control-Request-Method": "PUT"})
    assert status == 403 and "access-control-allow-origin" not in headers
    # a rebinding page: same origin from the browser's view, its own name as Host
    status, _, body = raw(embedded, "POST", "/moto-api/reset", {"Host": f"rebind.attacker.example:{port}"})
    assert status == 403 and b"not a loopback address or name" in body
    status, _, _ = raw(embedded, "GET", "/sdlocal/k", {"Host": f"127.0.0.1:{port}", "Sec-Fetch-Site": "cross-site"})
    assert status == 403
    # nothing was written, nothing reset; this machine's clients are served, without CORS headers
    client = boto3.client("s3", endpoint_url=embedded, region_name="us-east-1",
                          aws_access_key_id="x", aws_secret_access_key="x")
    got = client.get_object(Bucket="sdlocal", Key="k")
    assert got["Body"].read() == b"v"
    assert not any(k.startswith("access-control-") for k in got["ResponseMetadata"]["HTTPHeaders"])
    assert [o["Key"] for o in client.list_objects_v2(Bucket="sdlocal")["Contents"]] == ["k"]
    # a page of the endpoint's own origin is not refused by the guard (moto answers it)
    status, _, body = raw(embedded, "GET", "/moto-api/", {"Host": f"localhost:{port}",
                                                         "Origin": f"http://localhost:{port}"})
    assert status == 200
