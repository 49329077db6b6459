"""The S3 retry policy (trial/storage/_retry.py) on a fake clock with a scripted client, and once
against a real moto server stopped and started again on its port while a read waits."""
from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import boto3
import numpy as np
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError

from sdlocal.trial.errors import StorageError
from sdlocal.trial.storage import Retry, RetryPolicy, S3Storage
from sdlocal.trial.storage._retry import FATAL, MISSING_BUCKET, RETRY, _Outages, classify


class FakeTime:
    def __init__(self) -> None:
        self.now = 1000.0
        self.pauses: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.now += seconds


def client_error(code: str, status: int, op: str = "GetObject") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, op)


def refused() -> Exception:
    return EndpointConnectionError(endpoint_url="http://127.0.0.1:1/b/k")


class Body:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self) -> bytes:
        return self.data

    def close(self) -> None:
        pass


class Scripted:
    """A client whose calls fail as scripted (a function of the fake time) and then answer."""

    class meta:  # noqa: N801 - boto3's attribute name
        endpoint_url = "http://fake-s3"
        region_name = "us-east-1"

    def __init__(self, fails: Callable[[float], Exception | None], t: FakeTime) -> None:
        self.fails = fails
        self.t = t
        self.calls: list[str] = []
        self.created: list[str] = []

    def _call(self, op: str, result: Any) -> Any:
        self.calls.append(op)
        err = self.fails(self.t.now)
        if err is not None:
            raise err
        return result

    def get_object(self, **kwargs: Any) -> Any:
        return self._call("get_object", {"Body": Body(b"payload")})

    def put_object(self, **kwargs: Any) -> Any:
        return self._call("put_object", {})

    def list_objects_v2(self, **kwargs: Any) -> Any:
        return self._call("list_objects_v2", {"Contents": [{"Key": "p/a"}]})

    def head_object(self, **kwargs: Any) -> Any:
        return self._call("head_object", {})

    def create_bucket(self, **kwargs: Any) -> Any:
        self.created.append(kwargs["Bucket"])
        return {}


def storage(fails: Callable[[float], Exception | None], *, total: float = 120.0, **retry: Any) -> tuple[S3Storage, Scripted, FakeTime, list[str]]:
    t = FakeTime()
    said: list[str] = []
    outages = _Outages()
    outages.listeners.append(said.append)
    client = Scripted(fails, t)
    r = Retry(RetryPolicy(total_s=total), clock=t.clock, sleep=t.sleep, rand=lambda: 0.5, outages=outages, **retry)
    return S3Storage(f"b-{uuid.uuid4().hex[:8]}", "p", client=client, retry=r), client, t, said


def test_a_60_second_outage_is_ridden_through_with_growing_pauses_said_once() -> None:
    st, client, t, said = storage(lambda now: refused() if now < 1060.0 else None)
    assert st.read("k") == b"payload"
    assert t.now >= 1060.0
    assert t.pauses[:5] == pytest.approx([0.175, 0.35, 0.7, 1.4, 2.8])  # doubling, jitter 0.5 * 25 %
    assert max(t.pauses) == pytest.approx(5.0 * 0.875)  # capped
    assert t.now - 1060.0 <= 5.0  # noticed within one pause of the end
    assert len(said) == 2 and "does not answer" in said[0] and "retrying for up to 120 s" in said[0]
    assert said[1].startswith("S3 at http://fake-s3 answers again (after 6")


def test_gives_up_after_the_total_and_says_so() -> None:
    st, client, t, said = storage(lambda now: refused(), total=30.0)
    with pytest.raises(StorageError, match=r"cannot read s3://.*/p/k: .*Could not connect.*did not answer for 2\d s"):
        st.read("k")
    assert t.now - 1000.0 <= 30.0
    assert len(said) == 1
    # the next outage is said again
    with pytest.raises(StorageError):
        st.exists("k")
    assert len(said) == 2


@pytest.mark.parametrize(("err", "tries"), [
    (client_error("AccessDenied", 403), 1),
    (client_error("InvalidRequest", 400), 1),
    (client_error("InternalError", 500), 3),
    (client_error("SlowDown", 503), 3),
    (client_error("ServiceUnavailable", 503), 3),
    (ReadTimeoutError(endpoint_url="http://x"), 3),
    (ConnectionResetError(104, "Connection reset by peer"), 3),
])
def test_which_errors_are_tried_again(err: Exception, tries: int) -> None:
    count = [0]

    def fails(now: float) -> Exception | None:
        count[0] += 1
        return err if count[0] < 3 else None

    st, client, t, said = storage(fails)
    if tries == 1:
        with pytest.raises(StorageError, match="AccessDenied|InvalidRequest"):
            st.write("k", b"x")
    else:
        st.write("k", b"x")
    assert len(client.calls) == tries


def test_classify_looks_inside_wrapped_errors() -> None:
    from boto3.exceptions import S3UploadFailedError

    for inner, kind in ((refused(), RETRY), (client_error("AccessDenied", 403), FATAL),
                        (client_error("NoSuchBucket", 404), MISSING_BUCKET)):
        try:
            try:
                raise inner
            except Exception as e:
                raise S3UploadFailedError(f"Failed to upload: {e}")  # noqa: B904 - as boto3 does
        except S3UploadFailedError as wrapped:
            assert classify(wrapped) == kind


def test_a_bucket_never_seen_is_missing_at_once_one_seen_before_is_waited_for() -> None:
    gone = [True]
    st, client, t, said = storage(lambda now: client_error("NoSuchBucket", 404) if gone[0] else None)
    with pytest.raises(FileNotFoundError):
        st.read("k")
    with pytest.raises(StorageError, match="NoSuchBucket"):
        st.list()
    assert t.pauses == []  # a wrong bucket name fails at once
    gone[0] = False
    assert st.list() == ["a"]  # seen now
    client.fails = lambda now: client_error("NoSuchBucket", 404) if now < 1030.0 else None
    assert st.list() == ["a"]  # waited through the endpoint's restart
    assert t.now >= 1030.0 and client.created == []


def test_the_launcher_recreates_a_missing_bucket_and_is_told() -> None:
    created = [False]

    def fails(now: float) -> Exception | None:
        return None if created[0] else client_error("NoSuchBucket", 404)

    told: list[str] = []
    st, client, t, said = storage(fails, recreate_bucket=True, on_bucket_recreated=told.append)
    real_create = client.create_bucket

    def create(**kwargs: Any) -> Any:
        created[0] = True
        return real_create(**kwargs)

    client.create_bucket = create  # type: ignore[method-assign]
    st.write("k", b"x")
    assert client.created == [st.bucket] and told == [st.bucket] and t.pauses == []


def test_a_cancelled_wait_gives_up_at_once() -> None:
    cancel = threading.Event()
    st, client, t, said = storage(lambda now: refused(), cancel=cancel)
    cancel.set()
    with pytest.raises(StorageError, match="stopped while S3 did not answer"):
        st.read("k")
    assert len(client.calls) == 1


def test_policy_from_environment() -> None:
    assert RetryPolicy.from_environ({}).total_s == 120.0
    assert RetryPolicy.from_environ({"SDLOCAL_S3_RETRY_S": "5"}).total_s == 5.0
    with pytest.raises(ValueError, match="SDLOCAL_S3_RETRY_S"):
        RetryPolicy.from_environ({"SDLOCAL_S3_RETRY_S": "soon"})
    with pytest.raises(ValueError, match=">= 0"):
        RetryPolicy.from_environ({"SDLOCAL_S3_RETRY_S": "-1"})


def test_write_if_absent_keeps_what_is_there(s3_client: Any, bucket: str) -> None:
    st = S3Storage(bucket, "p", client=s3_client)
    st.write("status.json", b"new", if_absent=True)
    st.write("status.json", b"old", if_absent=True)
    assert st.read("status.json") == b"new"


def test_a_read_waits_for_a_real_moto_killed_and_started_again_empty() -> None:
    from sdlocal.trial.storage import client_config
    from tests.moto_process import MotoProcess

    moto = MotoProcess()
    moto.start()
    try:
        client = boto3.client("s3", endpoint_url=moto.url, region_name="us-east-1", config=client_config())
        client.create_bucket(Bucket="restart")
        client.put_object(Bucket="restart", Key="p/k", Body=b"before")
        said: list[str] = []
        outages = _Outages()
        outages.listeners.append(said.append)
        # the reader's pauses pass through `gate`: the test holds it while it makes the bucket and
        # the object again, so no try falls between the two (it would find the key missing: an error)
        gate = threading.Lock()
        pausing = threading.Event()  # set while the reader is between two tries (not in one)

        def pause(seconds: float) -> None:
            pausing.set()
            time.sleep(seconds)
            with gate:
                pausing.clear()

        st = S3Storage("restart", "p", client=client,
                       retry=Retry(RetryPolicy(total_s=30), sleep=pause, outages=outages))
        assert st.read("k") == b"before"
        moto.kill()
        got: list[bytes] = []
        reader = threading.Thread(target=lambda: got.append(st.read("k")))
        started = time.monotonic()
        reader.start()
        time.sleep(1.0)
        assert reader.is_alive()  # waiting, not failed
        moto.start()
        time.sleep(1.0)
        assert reader.is_alive()  # back, but empty: the bucket it saw before is waited for
        with gate:
            assert pausing.wait(30)  # no try in flight now, and the next one waits for the gate
            client.create_bucket(Bucket="restart")
            client.put_object(Bucket="restart", Key="p/k", Body=b"after")
        reader.join(30)
        assert got == [b"after"] and time.monotonic() - started < 30
        assert len(said) == 2 and "does not answer" in said[0] and "answers again" in said[1]
    finally:
        moto.kill()


def test_a_body_cut_short_is_read_again_and_a_whole_one_read_once() -> None:
    """An S3 answer whose body ends before its Content-Length (a connection lost mid-body): the
    ranged read is tried again, never handed back short; a whole one is read exactly as sent."""
    import http.server

    data = bytes(range(256)) * 40_000  # 10 MB: read directly from the HTTP response
    tries: list[int] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            first, last = (int(x) for x in self.headers["Range"].split("=")[1].split("-"))
            body = data[first:last + 1]
            tries.append(len(tries))
            self.send_response(206)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Content-Range", f"bytes {first}-{last}/{len(data)}")
            self.end_headers()
            self.wfile.write(body[:len(body) // 3] if len(tries) == 1 else body)  # the first answer is cut
            self.wfile.flush()
            self.close_connection = True

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        client = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{server.server_address[1]}",
                              aws_access_key_id="t", aws_secret_access_key="t", region_name="us-east-1")
        st = S3Storage("bucket", "p", client=client, retry=Retry(RetryPolicy(total_s=10, first_delay_s=0.01)))
        got = st.read_range("k", 1000, 8_000_000, locate=lambda head: 7)
        assert bytes(got) == data[1000:8_001_000] and len(tries) == 2
        assert (np.frombuffer(got, np.uint8).ctypes.data + 7) % 64 == 0  # `locate`'s byte aligned
        tries.clear()
        tries.append(-1)  # no cut from now on
        assert bytes(st.read_range("k", 5, 3_000_000)) == data[5:3_000_005] and len(tries) == 2
    finally:
        server.shutdown()
        server.server_close()
