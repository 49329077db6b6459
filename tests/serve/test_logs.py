"""launcher/serve/logs.py: every line of the training log reaches CloudWatch Logs in order (blank
lines as a space, long lines in pieces), in calls within PutLogEvents' limits, the offset moved on
only after a successful call, a failed call tried again and said once. Against moto's CloudWatch
Logs in-process (botocore validates each call as it does for AWS) behind a recording client."""
from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import EndpointConnectionError, ParamValidationError
from moto import mock_aws

from sdlocal.launcher.serve.logs import (
    EVENT_OVERHEAD,
    LOG_GROUP,
    MAX_BATCH_BYTES,
    MAX_BATCH_EVENTS,
    MAX_EVENT_BYTES,
    LogPump,
    batches,
    line_messages,
    read_lines,
)


class Recording:
    """A logs client: each PutLogEvents call checked against CloudWatch's limits and recorded, then
    passed to the real (moto) client; `fail` calls raise before anything is stored."""

    def __init__(self, real: Any, fail: int = 0) -> None:
        self.real = real
        self.exceptions = real.exceptions
        self.fail = fail
        self.calls: list[list[dict[str, Any]]] = []
        self.failed = 0

    def put_log_events(self, **kwargs: Any) -> Any:
        if self.failed < self.fail:
            self.failed += 1
            raise EndpointConnectionError(endpoint_url="http://127.0.0.1:1")
        events = kwargs["logEvents"]
        assert 1 <= len(events) <= MAX_BATCH_EVENTS
        assert sum(len(e["message"].encode()) + EVENT_OVERHEAD for e in events) <= MAX_BATCH_BYTES
        assert all(1 <= len(e["message"].encode()) + EVENT_OVERHEAD <= MAX_EVENT_BYTES for e in events)
        self.calls.append(events)
        return self.real.put_log_events(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


@pytest.fixture
def logs() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("logs", region_name="us-east-1")


def read_back(logs: Any, stream: str) -> list[str]:
    """Every message of the stream, in order, as the SDK pages through them."""
    out: list[str] = []
    token = None
    while True:
        kwargs = {"nextToken": token} if token else {}
        page = logs.get_log_events(logGroupName=LOG_GROUP, logStreamName=stream, startFromHead=True, **kwargs)
        out += [e["message"] for e in page["events"]]
        if not page["events"]:
            return out
        token = page["nextForwardToken"]


def test_messages_of_a_line() -> None:
    assert line_messages("") == [" "] and line_messages("x") == ["x"]
    long = "a" * 600_000
    pieces = line_messages(long)
    assert "".join(pieces) == long and len(pieces) == 3
    assert all(len(p.encode()) + EVENT_OVERHEAD <= MAX_EVENT_BYTES for p in pieces)
    wide = "é€𝄞" * 50_000  # 2-, 3- and 4-byte characters: cuts fall between characters
    pieces = line_messages(wide)
    assert "".join(pieces) == wide and len(pieces) == 2
    assert all(len(p.encode()) + EVENT_OVERHEAD <= MAX_EVENT_BYTES for p in pieces)


def test_lines_split_at_newlines_only() -> None:
    data = b"a\n\nb\r\nform\x0cfeed\rcarriage\nbad \xff\nlast"
    lines = read_lines(data, 100)
    assert [m for line in lines for m in line.messages] == ["a", " ", "b", "form\x0cfeed\rcarriage", "bad \ufffd",
                                                            "last"]
    assert [(line.start, line.end) for line in lines] == [(100, 102), (102, 103), (103, 106), (106, 125),
                                                           (125, 131), (131, 135)]


def test_batches_within_putlogevents_limits() -> None:
    many = read_lines(b"".join(b"line %d\n" % i for i in range(25_000)), 0)
    got = list(batches(many))
    assert [len(b.messages) for b in got] == [10_000, 10_000, 5_000]
    assert [b.offset for b in got] == [many[9_999].end, many[19_999].end, many[-1].end] and not any(b.skip for b in got)
    # big lines: a batch is full at 1 MiB with the overhead counted
    big = read_lines(b"".join(bytes([65 + i]) * 200_000 + b"\n" for i in range(12)), 0)
    got = list(batches(big))
    assert [len(b.messages) for b in got] == [5, 5, 2]  # 5 * (200,000 + 26) <= 1,048,576 < 6 * ...
    assert all(sum(len(m) + EVENT_OVERHEAD for m in b.messages) <= MAX_BATCH_BYTES for b in got)
    # a line longer than a batch: the batch ends inside it (offset at its start, messages sent skipped)
    huge = read_lines(b"x\n" + b"h" * 3_000_000 + b"\ny\n", 0)
    got = list(batches(huge))
    # 12 pieces of <= 262,118 bytes (+26): "x" and 3 pieces, then 4 pieces (exactly 1 MiB) twice, then 1 and "y"
    assert [(b.offset, b.skip) for b in got] == [(2, 3), (2, 7), (2, 11), (huge[2].end, 0)]
    assert "".join(m for b in got for m in b.messages)[1:-1] == "h" * 3_000_000
    rest = list(batches(read_lines(b"h" * 3_000_000 + b"\ny\n", 2), skip=3))
    assert [m for b in rest for m in b.messages] == [m for b in got[1:] for m in b.messages]


def test_every_line_in_order(tmp_path: Path, logs: Any) -> None:
    log = tmp_path / "training.log"
    expected = []
    with log.open("w") as fh:
        for i in range(1500):
            line = "" if i % 7 == 0 else f"step {i} loss {1 / (i + 1):.4f}"
            fh.write(line + "\n")
            expected.append(line or " ")
        fh.write("x" * 300_000 + "\n")  # one line, two events
        fh.write("partial")  # no newline yet
    client = Recording(logs)
    pump = LogPump(client, "job", log)
    assert pump.send_new() == 1502
    assert read_back(logs, pump.stream) == [*expected, "x" * 262_118, "x" * 37_882]
    with log.open("a") as fh:
        fh.write(" line\n\n")
    assert pump.send_new() == 2
    pump.finish(timeout=5)
    assert read_back(logs, pump.stream)[-2:] == ["partial line", " "]
    assert all(c[i]["timestamp"] <= c[i + 1]["timestamp"] for c in client.calls for i in range(len(c) - 1))


def test_a_failed_put_is_tried_again_and_said_once(tmp_path: Path, logs: Any) -> None:
    log = tmp_path / "training.log"
    log.write_text("".join(f"line {i}\n" if i % 10 else "\n" for i in range(2000)))
    expected = [f"line {i}" if i % 10 else " " for i in range(2000)]
    said: list[str] = []
    client = Recording(logs, fail=3)
    pump = LogPump(client, "job", log, on_error=said.append)
    for _ in range(3):  # a call that fails raises, and the offset stays
        with pytest.raises(EndpointConnectionError):
            pump.send_new()
    assert read_back(logs, pump.stream) == []
    assert pump.send_new() == 2000  # nothing was lost, nothing sent twice
    assert read_back(logs, pump.stream) == expected
    # the pump's own rounds: an outage of 5 failed tries is said once, then every line arrives
    pump.interval = 0.05
    client.fail, client.failed = 5, 0
    with log.open("a") as fh:
        fh.write("after\n\n")
    pump.start()
    deadline = time.monotonic() + 10
    while read_back(logs, pump.stream)[-2:] != ["after", " "]:
        assert time.monotonic() < deadline, (client.failed, said)
        time.sleep(0.05)
    assert client.failed == 5
    assert len(said) == 1 and said[0].startswith("sending the training log to CloudWatch Logs failed, trying again: "
                                                 "EndpointConnectionError")
    # a second outage is said again, once
    client.fail, client.failed = 3, 0
    with log.open("a") as fh:
        fh.write("later\n")
    pump.finish(timeout=5)
    assert client.failed == 3 and len(said) == 2
    assert read_back(logs, pump.stream) == [*expected, "after", " ", "later"]


def test_what_cannot_be_sent_by_the_deadline_is_said(tmp_path: Path, logs: Any) -> None:
    log = tmp_path / "training.log"
    log.write_text("one\ntwo\n")
    said: list[str] = []
    pump = LogPump(Recording(logs, fail=10**6), "job", log, interval=0.05, on_error=said.append)
    started = time.monotonic()
    pump.finish(timeout=0.5)
    assert time.monotonic() - started < 5
    assert len(said) == 2 and "trying again" in said[0] and "from byte 0 on was not sent" in said[1]


def test_a_stream_created_by_a_lost_answer(tmp_path: Path, logs: Any) -> None:
    """create_log_stream succeeded but its answer was lost: the next round goes on with the stream."""
    log = tmp_path / "training.log"
    log.write_text("a\n")
    pump = LogPump(logs, "job", log)
    logs.create_log_group(logGroupName=LOG_GROUP)
    logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=pump.stream)
    assert pump.send_new() == 1 and read_back(logs, pump.stream) == ["a"]


def test_rounds_and_finish_do_not_send_twice(tmp_path: Path, logs: Any) -> None:
    log = tmp_path / "training.log"
    client = Recording(logs)
    pump = LogPump(client, "job", log, interval=0.01)
    pump.start()
    writer_done = threading.Event()

    def write() -> None:
        with log.open("a") as fh:
            for i in range(3000):
                fh.write(f"{i}\n" if i % 3 else "\n")
                if i % 500 == 0:
                    fh.flush()
                    time.sleep(0.03)
        writer_done.set()

    thread = threading.Thread(target=write)
    thread.start()
    thread.join(30)
    assert writer_done.is_set()
    pump.finish(timeout=5)
    assert read_back(logs, pump.stream) == [f"{i}" if i % 3 else " " for i in range(3000)]
    assert len(client.calls) > 1  # several rounds


def test_put_without_the_blank_line_fix_is_refused(logs: Any) -> None:
    """Why blank lines become a space: botocore refuses an empty message, the whole call."""
    logs.create_log_group(logGroupName=LOG_GROUP)
    logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName="s")
    with pytest.raises(ParamValidationError, match="logEvents\\[1\\].message"):
        logs.put_log_events(logGroupName=LOG_GROUP, logStreamName="s",
                            logEvents=[{"timestamp": 1, "message": "a"}, {"timestamp": 1, "message": ""}])
