"""Endpoint resolution and the embedded S3 server's start / reuse / stale restart / stop."""
from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from sdlocal.launcher.errors import S3EndpointError
from sdlocal.launcher.s3.embedded import EmbeddedS3, is_answering
from sdlocal.launcher.s3.endpoint import S3Endpoint, aws_credentials_present, ensure_bucket, resolve_endpoint


class _FakeEmbedded:
    """Stands in for EmbeddedS3: says it was started, starts nothing."""

    def __init__(self) -> None:
        self.started = 0

    def ensure(self) -> Any:
        self.started += 1
        return type("State", (), {"url": "http://127.0.0.1:9"})()


def test_resolution_order(tmp_path: Path) -> None:
    env = {"AWS_ENDPOINT_URL_S3": "http://env:1"}
    def creds() -> bool:
        return True

    assert resolve_endpoint("http://flag:1", environ=env, credentials_present=creds) == S3Endpoint("http://flag:1", "flag")
    assert resolve_endpoint(None, environ=env, credentials_present=creds) == S3Endpoint("http://env:1", "env")
    # a custom endpoint (LocalStack, moto) without credentials gets dummy ones, not a boto3 error
    bare = resolve_endpoint("http://flag:1", environ=env, credentials_present=lambda: False)
    assert bare == S3Endpoint("http://flag:1", "flag", dummy_credentials=True)
    assert bare.child_env()["AWS_ACCESS_KEY_ID"] == "sdlocal"
    # AWS_ENDPOINT_URL (LocalStack's docs: one endpoint for all services) after the S3-specific one
    both = {"AWS_ENDPOINT_URL": "http://all:1", **env}
    assert resolve_endpoint(None, environ=both, credentials_present=creds) == S3Endpoint("http://env:1", "env")
    everything = resolve_endpoint(None, environ={"AWS_ENDPOINT_URL": "http://all:1"}, credentials_present=creds)
    assert everything == S3Endpoint("http://all:1", "env-global")
    assert everything.describe() == "S3: http://all:1 (AWS_ENDPOINT_URL)"
    assert everything.child_env() == {"AWS_ENDPOINT_URL_S3": "http://all:1"}


def test_aws_credentials_alone_never_choose_amazon_s3() -> None:
    """Every SageMaker user has credentials: they are said to be unused, and the embedded S3 is used."""
    embedded = _FakeEmbedded()
    chosen = resolve_endpoint(None, environ={}, credentials_present=lambda: True, embedded=embedded)
    assert chosen.source == "embedded" and chosen.dummy_credentials and embedded.started == 1
    assert "your AWS credentials are not used" in chosen.describe() and "--s3 aws" in chosen.describe()
    quiet = resolve_endpoint(None, environ={}, credentials_present=lambda: False, embedded=_FakeEmbedded())
    assert "credentials" not in quiet.describe()


def test_amazon_s3_only_when_asked_for_by_name() -> None:
    never = _FakeEmbedded()
    for choice, env in (("aws", {}), (None, {"SDLOCAL_S3": "aws"})):
        aws = resolve_endpoint(None, choice, environ=env, credentials_present=lambda: True, embedded=never)
        assert aws == S3Endpoint(None, "aws") and aws.child_env() == {}
        assert "Amazon S3" in aws.describe()
    assert never.started == 0
    # `--s3 embedded` wins over an endpoint in the environment; the flag over SDLOCAL_S3
    embedded = _FakeEmbedded()
    chosen = resolve_endpoint(None, "embedded", environ={"AWS_ENDPOINT_URL_S3": "http://env:1", "SDLOCAL_S3": "aws"},
                              credentials_present=lambda: True, embedded=embedded)
    assert chosen.source == "embedded" and embedded.started == 1


@pytest.mark.parametrize(("flag", "choice", "env", "creds", "message"), [
    (None, "aws", {}, False, "--s3 aws: no AWS credentials found"),
    (None, None, {"SDLOCAL_S3": "amazon"}, True, "SDLOCAL_S3: 'amazon' is not one of embedded, aws"),
    ("http://flag:1", "aws", {}, True, "--s3-endpoint-url and --s3 both choose the S3: give one"),
])
def test_s3_choice_errors_name_their_culprit(flag: str | None, choice: str | None, env: dict[str, str],
                                             creds: bool, message: str) -> None:
    with pytest.raises(S3EndpointError) as e:
        resolve_endpoint(flag, choice, environ=env, credentials_present=lambda: creds, embedded=_FakeEmbedded())
    assert str(e.value).startswith(message)


def test_credentials_detection(tmp_path: Path) -> None:
    assert aws_credentials_present({"AWS_ACCESS_KEY_ID": "x"}, home=tmp_path)
    assert not aws_credentials_present({}, home=tmp_path)
    (tmp_path / ".aws").mkdir()
    (tmp_path / ".aws" / "credentials").write_text("[default]\n")
    assert aws_credentials_present({}, home=tmp_path)


def test_embedded_server_start_reuse_stop(tmp_path: Path) -> None:
    server = EmbeddedS3(tmp_path)
    endpoint = resolve_endpoint(None, environ={}, credentials_present=lambda: False, embedded=server)
    try:
        assert endpoint.source == "embedded" and endpoint.dummy_credentials
        assert endpoint.child_env()["AWS_ENDPOINT_URL_S3"] == endpoint.url
        state = json.loads((tmp_path / "s3.json").read_text())
        assert endpoint.url == state["url"] and is_answering(state["url"])
        client = endpoint.client()
        ensure_bucket(client, "sdlocal")
        ensure_bucket(client, "sdlocal")  # idempotent
        client.put_object(Bucket="sdlocal", Key="k", Body=b"v")
        # a second command reuses the same server (and its data)
        again = EmbeddedS3(tmp_path).ensure()
        assert again.pid == state["pid"] and again.url == endpoint.url
        assert client.get_object(Bucket="sdlocal", Key="k")["Body"].read() == b"v"
    finally:
        stopped = server.stop()
    assert stopped is not None and stopped.pid == state["pid"]
    assert not (tmp_path / "s3.json").exists()
    assert not is_answering(endpoint.url or "")
    assert not _alive(state["pid"])
    assert server.stop() is None


def test_stale_state_is_replaced(tmp_path: Path) -> None:
    # a recorded server that no longer answers (dead pid, nothing on the port)
    (tmp_path / "s3.json").write_text(json.dumps({"port": 9, "pid": 999999, "url": "http://127.0.0.1:9"}))
    server = EmbeddedS3(tmp_path)
    try:
        state = server.ensure()
        assert state.port != 9 and is_answering(state.url)
        assert server.running() == state
    finally:
        server.stop()


def test_embedded_server_keeps_its_data_across_stop_and_crash(tmp_path: Path) -> None:
    server = EmbeddedS3(tmp_path)
    first = server.ensure()
    try:
        client = S3Endpoint(first.url, "embedded", dummy_credentials=True).client()
        ensure_bucket(client, "sdlocal")
        client.put_object(Bucket="sdlocal", Key="jobs/j/a", Body=b"kept", Metadata={"who": "test"})
        client.put_object(Bucket="sdlocal", Key="jobs/j/gone", Body=b"x")
        client.delete_object(Bucket="sdlocal", Key="jobs/j/gone")
        server.stop()
        assert not is_answering(first.url)
        again = server.ensure()  # `sdlocal s3 stop`, then any command: same port, same data
        assert again.url == first.url and again.pid != first.pid
        got = client.get_object(Bucket="sdlocal", Key="jobs/j/a")
        assert got["Body"].read() == b"kept" and got["Metadata"] == {"who": "test"}
        assert [o["Key"] for o in client.list_objects_v2(Bucket="sdlocal")["Contents"]] == ["jobs/j/a"]
        os.kill(again.pid, signal.SIGKILL)  # a crash: what was acknowledged is on disk
        third = server.ensure()
        assert third.url == first.url
        assert client.get_object(Bucket="sdlocal", Key="jobs/j/a")["Body"].read() == b"kept"
        usage = server.usage()
        assert (usage.buckets, usage.objects, usage.bytes) == (1, 1, 4)
    finally:
        server.stop()


def test_s3_status_and_stop_say_where_the_data_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from sdlocal.launcher.cli import cli

    monkeypatch.setenv("SDLOCAL_HOME", str(tmp_path))
    server = EmbeddedS3(tmp_path)
    state = server.ensure()
    try:
        client = S3Endpoint(state.url, "embedded", dummy_credentials=True).client()
        ensure_bucket(client, "sdlocal")
        client.put_object(Bucket="sdlocal", Key="k", Body=b"12345")
        out = CliRunner().invoke(cli, ["s3", "status"]).output
        assert f"running at {state.url}" in out
        assert f"data: {tmp_path / 's3-data'} (1 bucket(s), 1 object(s), 5 bytes; kept across restarts)" in out
        out = CliRunner().invoke(cli, ["s3", "stop"]).output
        assert "stopped the embedded S3 server" in out and f"its data stays in {tmp_path / 's3-data'}" in out
        out = CliRunner().invoke(cli, ["s3", "stop", "--discard-data"]).output
        assert "not running" in out and "deleted its data" in out
        assert server.usage().objects == 0
    finally:
        server.stop()


def test_a_job_s_watchdog_starts_the_embedded_server_again(tmp_path: Path) -> None:
    from sdlocal.launcher.s3.embedded import EmbeddedWatchdog

    server = EmbeddedS3(tmp_path)
    state = server.ensure()
    said: list[str] = []
    watchdog = EmbeddedWatchdog(server, state.url, said.append, interval=0.3).start()
    try:
        os.kill(state.pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while not watchdog.restarts and time.monotonic() < deadline:
            time.sleep(0.1)
        assert watchdog.restarts == 1 and is_answering(state.url)
        assert said and "started again" in said[0]
    finally:
        watchdog.stop()
        server.stop()


def test_ensure_bucket_on_moto(moto_server: str) -> None:
    client = S3Endpoint(moto_server, "flag").client()
    ensure_bucket(client, "made-by-sdlocal")
    assert "made-by-sdlocal" in [b["Name"] for b in client.list_buckets()["Buckets"]]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie child of this test process counts as gone
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "zombie" in status.read_text())


@pytest.fixture(autouse=True)
def _no_endpoint_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)


def test_first_contact_refuses_only_an_endpoint_where_nothing_answers() -> None:
    """Nothing listening: refused within the first-contact deadline. A connection accepted but not
    answered (a LocalStack still starting, a frozen server): contact made; the calls' retries ride
    out what follows."""
    import socket
    import threading

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    with pytest.raises(S3EndpointError, match=f"S3 endpoint http://127.0.0.1:{closed_port} does not answer"):
        S3Endpoint(f"http://127.0.0.1:{closed_port}", "flag", dummy_credentials=True).check_answers(1.0)

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        silent.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(silent.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        S3Endpoint(f"http://127.0.0.1:{silent.getsockname()[1]}", "flag", dummy_credentials=True).check_answers(1.0)
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        silent.close()
