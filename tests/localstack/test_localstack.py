"""sdlocal against a real LocalStack (tests/localstack/conftest.py), as localstack/README.md tells a
user to run it: `AWS_ENDPOINT_URL` and dummy credentials, no `--s3-endpoint-url`. A real
`sdlocal run` (process runtime: real hook, real evaluators) writes the trial, the rule statuses and
the end marker into LocalStack's S3, `sdlocal summary` reads them back; a rule's Email/SMS/
StopTraining actions reach LocalStack's SNS (an SQS queue subscribed to the topic, LocalStack's SMS
and SES mailboxes) and stop the job."""
from __future__ import annotations

import json
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from sdlocal.evaluator.actions import RESULTS_KEY, SNS_TOPIC_NAME, STOP_TRAINING_KEY
from tests.helpers import run_sdlocal, s3_keys
from tests.localstack.conftest import aws_client

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.docker, pytest.mark.slow,
              # testcontainers' own LocalStackContainer.start still calls its deprecated wait_for_logs
              pytest.mark.filterwarnings("ignore:The wait_for_logs function:DeprecationWarning")]
RULES = ["VanishingGradient", "ExplodingTensor", "LossNotDecreasing"]


def sdlocal(args: list[str], env: dict[str, str], timeout: float = 400) -> tuple[int, str, str]:
    proc = run_sdlocal(*args, home=None, runtime=None, base=env, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


def keys(s3: Any, prefix: str) -> set[str]:
    return set(s3_keys(s3, "sdlocal", prefix))


def verdicts_of(rows: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(r["RuleConfigurationName"], r["RuleEvaluationStatus"], r.get("StatusDetails") or "") for r in rows]


def test_job_outputs_land_in_localstack_s3_and_summary_reads_them(
        localstack_url: str, localstack_env: dict[str, str]) -> None:
    job = f"ls-ok-{uuid.uuid4().hex[:6]}"
    code, out, err = sdlocal(["run", "examples/job.yaml", "--job-name", job, "--runtime", "process", "--json"],
                             localstack_env)
    assert code == 0, err
    assert f"S3: {localstack_url} (AWS_ENDPOINT_URL)" in err  # said out loud, not "Amazon S3"
    rows = json.loads(out)
    assert [(r["RuleConfigurationName"], r["RuleEvaluationStatus"]) for r in rows] == \
        [(rule, "NoIssuesFound") for rule in RULES]

    s3 = aws_client("s3", localstack_url)
    stored = keys(s3, f"jobs/{job}/")
    assert f"jobs/{job}/debug-output/training_job_end.ts" in stored
    assert any(k.startswith(f"jobs/{job}/debug-output/index/") for k in stored)
    assert any(k.startswith(f"jobs/{job}/debug-output/events/") and k.endswith(".tfevents") for k in stored)
    for rule in RULES:
        status = json.loads(s3.get_object(Bucket="sdlocal", Key=f"jobs/{job}/rule-output/{rule}/status.json")
                            ["Body"].read())
        assert status["RuleEvaluationStatus"] == "NoIssuesFound", status
    # every tensor file the hook wrote in the job folder was uploaded to LocalStack
    tensors = Path(localstack_env["SDLOCAL_HOME"]) / "jobs" / job / "output" / "tensors"
    written = {p.relative_to(tensors).as_posix() for p in tensors.rglob("*")
               if p.is_file() and not p.name.endswith(".tmp") and p.name != ".sdlocal-steps.json"}  # (for the launcher)
    uploaded = {k.split("/debug-output/", 1)[1] for k in stored if "/debug-output/" in k}
    assert written and written <= uploaded, sorted(written - uploaded)

    code, out, err = sdlocal(["summary", job, "--json"], localstack_env, timeout=60)
    assert code == 0, err
    assert verdicts_of(json.loads(out)) == verdicts_of(rows)


def _subscribe_queue(localstack_url: str) -> tuple[Any, str]:
    """An SQS queue subscribed to the topic the evaluators publish to (CreateTopic is idempotent:
    the evaluator finds this topic)."""
    sns, sqs = aws_client("sns", localstack_url), aws_client("sqs", localstack_url)
    topic = sns.create_topic(Name=SNS_TOPIC_NAME)["TopicArn"]
    queue = sqs.create_queue(QueueName=f"rules-{uuid.uuid4().hex[:6]}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn)
    return sqs, queue


def _messages(sqs: Any, queue: str, want: int, deadline_s: float = 30) -> list[dict[str, Any]]:
    """The notifications in `queue`, once `want` arrived or the deadline passed (then what there is)."""
    got: list[dict[str, Any]] = []
    deadline = time.monotonic() + deadline_s
    while len(got) < want and time.monotonic() < deadline:
        batch = sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=2, MaxNumberOfMessages=10).get("Messages", [])
        for message in batch:
            got.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
    return got


def _localstack_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read())


def exploding_spec(path: Path, actions: list[dict[str, str]]) -> None:
    """examples/job.yaml made to diverge (ExplodingTensor fires at once) and to run for long
    unless StopTraining stops it, with `actions` on its one rule."""
    spec = yaml.safe_load((REPO / "examples" / "job.yaml").read_text())
    spec["SourceDir"] = str(REPO / "examples")
    spec["HyperParameters"] = {"steps": "100000", "lr": "1e5"}
    spec["DebugRuleConfigurations"] = [
        {"RuleConfigurationName": "ExplodingTensor",
         "RuleParameters": {"rule_to_invoke": "ExplodingTensor", "collection_names": "gradients,losses",
                            "action_json": json.dumps(actions)}}]
    path.write_text(yaml.safe_dump(spec))


def test_rule_actions_publish_to_localstack_sns_and_stop_the_job(
        localstack_url: str, localstack_env: dict[str, str], tmp_path: Path) -> None:
    job = f"ls-boom-{uuid.uuid4().hex[:6]}"
    phone, email = "+15555550123", f"{job}@example.com"
    sqs, queue = _subscribe_queue(localstack_url)
    actions = [{"name": "SMS", "endpoint": phone}, {"name": "Email", "endpoint": email},
               {"name": "StopTraining"}]
    exploding_spec(tmp_path / "job.yaml", actions)

    code, out, err = sdlocal(["run", str(tmp_path / "job.yaml"), "--job-name", job, "--runtime", "process", "--json"],
                             localstack_env)
    assert code == 0, err
    (row,) = json.loads(out)
    assert row["RuleEvaluationStatus"] == "IssuesFound", row
    assert "StopTraining" in err and "Stopped" in err, err[-2000:]

    # SNS: each notify action subscribes its endpoint, then publishes once to the topic, in the
    # order of action_json: the SQS queue and the phone (subscribed before the first publish) got
    # both messages, the email address (subscribed by the second action) the second one
    bodies = _messages(sqs, queue, want=2)
    assert len(bodies) == 2, bodies
    assert {b["TopicArn"].rsplit(":", 1)[1] for b in bodies} == {SNS_TOPIC_NAME}
    published = sorted(b["Message"] for b in bodies)
    assert all(f"rule ExplodingTensor of training job {job} found an issue" in m for m in published)
    sms = _localstack_json(f"{localstack_url}/_aws/sns/sms-messages")["sms_messages"].get(phone, [])
    assert sorted(m["Message"] for m in sms) == published
    mails = [m for m in _localstack_json(f"{localstack_url}/_aws/ses")["messages"]
             if m["Destination"]["ToAddresses"] == [email]]
    assert len(mails) == 1 and mails[0]["Body"]["text_part"] in published, mails

    # the action results and the stop request are in LocalStack's S3 too, with the end marker
    s3 = aws_client("s3", localstack_url)
    out_prefix = f"jobs/{job}/rule-output/ExplodingTensor/"
    results = json.loads(s3.get_object(Bucket="sdlocal", Key=out_prefix + RESULTS_KEY)["Body"].read())
    assert [(r["name"], r["ok"]) for r in results] == [("sms", True), ("email", True), ("stoptraining", True)]
    stored = keys(s3, f"jobs/{job}/")
    assert out_prefix + STOP_TRAINING_KEY in stored
    assert f"jobs/{job}/debug-output/training_job_end.ts" in stored


def test_docker_runtime_reaches_localstack_through_the_gateway(
        localstack_url: str, localstack_env: dict[str, str], sdlocal_images: Any, tmp_path: Path) -> None:
    """The containers' only way out is the job's S3 gateway (a TCP relay to the endpoint): S3 and,
    on LocalStack's one port, SNS go through it."""
    job = f"ls-dock-{uuid.uuid4().hex[:6]}"
    phone = "+15555550124"
    exploding_spec(tmp_path / "job.yaml", [{"name": "SMS", "endpoint": phone}, {"name": "StopTraining"}])
    code, out, err = sdlocal(["run", str(tmp_path / "job.yaml"), "--job-name", job, "--runtime", "docker", "--json"],
                             localstack_env)
    assert code == 0, err
    assert "Runtime: docker" in err and f"Training job {job}: Stopped" in err, err[-2000:]
    (row,) = json.loads(out)
    assert row["RuleEvaluationStatus"] == "IssuesFound", row
    sms = _localstack_json(f"{localstack_url}/_aws/sns/sms-messages")["sms_messages"].get(phone, [])
    assert len(sms) == 1 and f"training job {job} found an issue" in sms[0]["Message"], sms
    assert f"jobs/{job}/debug-output/training_job_end.ts" in keys(aws_client("s3", localstack_url), f"jobs/{job}/")


def test_reads_from_localstack_by_the_s3_benchmark(localstack_url: str, docker_client: Any, tmp_path: Path) -> None:
    """benchmarks/s3_read.py's LocalStack part on the session's container: the small trial uploaded,
    read back by our reader and the facade with the local read's values, the container's CPU time
    counted from its control group."""
    import os
    import random

    from benchmarks.s3_read import cgroup_cpu_s, read_small
    from tests.localstack.conftest import LABEL, PID_LABEL

    mine = [c for c in docker_client.containers.list(filters={"label": f"{LABEL}=localstack"})
            if c.labels.get(PID_LABEL) == str(os.getpid())]
    assert len(mine) == 1
    pid = int(mine[0].attrs["State"]["Pid"])
    before = cgroup_cpu_s(pid)
    runs = read_small(2, None, tmp_path, {"localstack": (localstack_url, lambda: cgroup_cpu_s(pid))}, 1,
                      random.Random(0), None)
    assert {(r["server"], r["variant"]) for r in runs} == {("localstack", "ours"), ("localstack", "facade")}
    assert all(r["values"] == 2 * 49 for r in runs)
    assert cgroup_cpu_s(pid) > before and all(r["server_cpu_s"] > 0 for r in runs)
