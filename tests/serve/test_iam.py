"""The IAM/STS calls the SDK v3 makes to check its role, through boto3 against `sdlocal serve`
(in-process): answered as AWS answers for a permitted role; other IAM calls still reach moto."""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import boto3
import pytest

from sdlocal.launcher.serve.app import ServeServer


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServeServer]:
    srv = ServeServer(tmp_path / "home", port=0, runtime="process", echo=lambda _line: None)
    srv.start()
    try:
        yield srv
    finally:
        assert srv.stop(timeout=60) == []


def client(server: ServeServer, service: str) -> Any:
    return boto3.client(service, endpoint_url=server.url, region_name="us-east-1",
                        aws_access_key_id="x", aws_secret_access_key="x")


def test_role_checks_answered_as_for_a_permitted_role(server: ServeServer) -> None:
    iam, sts = client(server, "iam"), client(server, "sts")
    pages = iam.get_paginator("simulate_principal_policy").paginate(
        PolicySourceArn="arn:aws:iam::123456789012:role/service-role/AmazonSageMaker-ExecutionRole",
        ActionNames=["sagemaker:CreateTrainingJob", "s3:PutObject"], ResourceArns=["arn:aws:s3:::b/*", "*"])
    results = [r for page in pages for r in page["EvaluationResults"]]
    assert [(r["EvalActionName"], r["EvalResourceName"], r["EvalDecision"]) for r in results] == [
        ("sagemaker:CreateTrainingJob", "arn:aws:s3:::b/*", "allowed"), ("sagemaker:CreateTrainingJob", "*", "allowed"),
        ("s3:PutObject", "arn:aws:s3:::b/*", "allowed"), ("s3:PutObject", "*", "allowed")]
    role = iam.get_role(RoleName="AmazonSageMaker-ExecutionRole")["Role"]
    assert role["Arn"] == "arn:aws:iam::123456789012:role/AmazonSageMaker-ExecutionRole"
    trust = role["AssumeRolePolicyDocument"]
    trust = json.loads(unquote(trust)) if isinstance(trust, str) else trust
    assert trust["Statement"][0]["Principal"]["Service"] == "sagemaker.amazonaws.com"
    identity = sts.get_caller_identity()
    assert identity["Account"] == "123456789012" and ":assumed-role/" in identity["Arn"]


def test_other_iam_calls_reach_moto(server: ServeServer) -> None:
    iam = client(server, "iam")
    iam.create_user(UserName="someone")
    assert [u["UserName"] for u in iam.list_users()["Users"]] == ["someone"]
