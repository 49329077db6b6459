"""serve's SageMaker API refuses what no SDK sends, in the service's shapes: null or missing
required fields, names that only match before a final newline, oversized and too deeply nested
bodies (launcher/serve/app.py, api.py)."""
from __future__ import annotations

import http.client
import json
from typing import Any

from sdlocal.launcher.serve.app import ServeServer
from tests.serve.test_api import request, server  # noqa: F401 - the fixture


def post(srv: ServeServer, operation: str, body: bytes) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    try:
        conn.request("POST", "/", body=body, headers={"X-Amz-Target": f"SageMaker.{operation}",
                                                      "Content-Type": "application/x-amz-json-1.1"})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


def test_null_missing_and_newline_names_are_validation_errors(server: ServeServer) -> None:  # noqa: F811
    for name in (None, "job-a\n", "job-a\r\n", ""):
        status, answer = post(server, "CreateTrainingJob", json.dumps({**request("x"), "TrainingJobName": name}).encode())
        assert status == 400 and answer["__type"] == "ValidationException", (name, answer)
    body = request("x")
    del body["RoleArn"]
    status, answer = post(server, "CreateTrainingJob", json.dumps({**body, "OutputDataConfig": None}).encode())
    assert status == 400 and answer["message"] == "missing required field(s): RoleArn, OutputDataConfig"
    assert server.api.jobs == {}
    status, answer = post(server, "DescribeTrainingJob", b'{"TrainingJobName": null}')
    assert status == 400 and answer["__type"] == "ValidationException"


def test_oversized_and_deeply_nested_bodies_are_refused(server: ServeServer) -> None:  # noqa: F811
    big = json.dumps({**request("big"), "Padding": "x" * (2 << 20)}).encode()
    status, answer = post(server, "CreateTrainingJob", big)
    assert status == 413 and answer["__type"] == "ValidationException"
    assert answer["message"].startswith(f"the request body is {len(big):,} bytes: over the limit of 1,048,576")
    deep = b"[" * 200_000 + b"]" * 200_000
    status, answer = post(server, "CreateTrainingJob", deep)
    assert status == 400 and answer == {"__type": "SerializationException",
                                        "message": "the request body nests deeper than 64 levels"}
    nested: Any = "x"
    for _ in range(100):
        nested = {"a": nested}
    status, answer = post(server, "CreateTrainingJob", json.dumps({**request("n"), "Tags": nested}).encode())
    assert status == 400 and answer["__type"] == "SerializationException"
    assert server.api.jobs == {}
    status, answer = post(server, "ListTrainingJobs", b"{}")  # the server is still there
    assert status == 200 and answer["TrainingJobSummaries"] == []


def test_iam_and_sts_bodies_are_bounded_as_the_api_s(server: ServeServer) -> None:  # noqa: F811
    """The SDK v3's IAM/STS calls share the API's body reader: a body over the limit is a 413 and
    a Content-Length that is no number a 400, never a 500, and the server stays up."""
    auth = "AWS4-HMAC-SHA256 Credential=testing/20261128/us-east-1/sts/aws4_request, SignedHeaders=host, Signature=0"

    def send(body: bytes, length: str) -> tuple[int, dict[str, Any]]:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        try:
            conn.putrequest("POST", "/")
            for key, value in (("Authorization", auth), ("Content-Type", "application/x-www-form-urlencoded"),
                               ("Content-Length", length)):
                conn.putheader(key, value)
            conn.endheaders(body)
            resp = conn.getresponse()
            return resp.status, json.loads(resp.read())
        finally:
            conn.close()

    big = b"Action=GetCallerIdentity&Padding=" + b"x" * (2 << 20)
    status, answer = send(big, str(len(big)))
    assert status == 413 and answer["__type"] == "ValidationException"
    assert answer["message"].startswith(f"the request body is {len(big):,} bytes: over the limit")
    status, answer = send(b"Action=GetCallerIdentity", "twenty")
    assert status == 400 and answer == {"__type": "SerializationException", "message": "Content-Length is not a number"}
    status, answer = post(server, "ListTrainingJobs", b"{}")
    assert status == 200
