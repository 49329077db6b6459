"""Rule actions: parsing, running once on the first IssuesFound, StopTraining's request object, and
Email/SMS published to a real moto server's SNS (read back through an SQS queue subscribed to the
topic), in-process and through `python -m sdlocal.evaluator`."""
from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import boto3
import numpy as np
import pytest

from sdlocal.evaluator.actions import (
    RESULTS_KEY,
    SNS_TOPIC_NAME,
    STOP_TRAINING_KEY,
    Action,
    ActionRunner,
    StopTrainingRequest,
    parse_actions,
    sns_client_factory,
)
from sdlocal.evaluator.api import run_rule
from sdlocal.evaluator.contract import RuleRequest
from sdlocal.evaluator.errors import RuleParameterError
from sdlocal.evaluator.status import RuleStatus, Status
from sdlocal.trial.storage import open_storage
from tests.evaluator._trials import write_steps
from tests.evaluator.test_main import contract, run_evaluator, status_from_s3, upload_dir


def test_parse_list_single_object_and_sdk_escaping() -> None:
    sdk = '[{\\"name\\": \\"StopTraining\\", \\"training_job_prefix\\": \\"job-\\"}, {\\"name\\": \\"Email\\", \\"endpoint\\": \\"a@b.com\\"}]'
    assert parse_actions(sdk, "R") == (Action("stoptraining", training_job_prefix="job-"), Action("email", endpoint="a@b.com"))
    assert parse_actions('{"name": "SMS", "endpoint": "+15555550100"}', "R") == (Action("sms", endpoint="+15555550100"),)
    assert parse_actions('{"name": "stoptraining"}', "R") == (Action("stoptraining"),)
    assert parse_actions("", "R") == () and parse_actions("[]", "R") == ()


@pytest.mark.parametrize(("raw", "reason"), [
    ('[{"name": "page-me"}]', "unknown action name 'page-me'"),
    ("[{name: x", "not JSON"),
    ('["stoptraining"]', "must be a JSON object"),
    ('{"name": "email"}', "needs an 'endpoint'"),
    ('{"name": "stoptraining", "training_job_prefix": ""}', "training_job_prefix must be a non-empty string"),
])
def test_bad_actions_name_the_rule_and_action_json(raw: str, reason: str) -> None:
    with pytest.raises(RuleParameterError, match=reason) as info:
        parse_actions(raw, "VanishingGradient")
    assert str(info.value).startswith("Rule VanishingGradient: invalid value") and "'action_json'" in str(info.value)
    with pytest.raises(RuleParameterError, match="action_json"):
        RuleRequest.from_parameters({"rule_to_invoke": "VanishingGradient", "action_json": raw})


def issues(step: int) -> RuleStatus:
    return RuleStatus("R", Status.ISSUES_FOUND, f"RuleEvaluationConditionMet: step {step}", last_evaluated_step=step)


def test_stop_training_writes_one_request_with_the_job_name_as_default_prefix(tmp_path: Path) -> None:
    out = open_storage(str(tmp_path / "rule-output"))
    runner = ActionRunner(parse_actions('[{"name": "StopTraining"}]', "R"), job_name="my-job",
                          rule_configuration_name="R", output=out, sns_client=lambda: pytest.fail("no SNS"))
    runner.on_status(RuleStatus("R", Status.IN_PROGRESS))
    assert not out.exists(STOP_TRAINING_KEY)
    runner.on_status(issues(7))
    runner.on_status(issues(9))  # the second report does not run the actions again
    request = StopTrainingRequest.from_json(out.read(STOP_TRAINING_KEY))
    assert (request.rule_configuration_name, request.job_name, request.training_job_prefix, request.step) == (
        "R", "my-job", "my-job", 7)
    assert request.matches("my-job") and not request.matches("other-my-job")
    results = json.loads(out.read(RESULTS_KEY))
    assert len(results) == 1 and results[0]["ok"] and results[0]["step"] == 7


@pytest.mark.parametrize("body", [b"[]", b"{}", b'{"TrainingJobPrefix": 3}', b"\xff", b"{",
                                  b'{"TrainingJobPrefix": "j", "Step": [1]}',
                                  b'{"TrainingJobPrefix": "j", "Step": {"a": 1}}',
                                  b'{"TrainingJobPrefix": "j", "Step": "x"}'])
def test_anything_but_a_stop_request_is_a_value_error(body: bytes) -> None:
    # the launcher's watcher skips a torn or foreign object on ValueError; nothing else may escape
    with pytest.raises(ValueError):
        StopTrainingRequest.from_json(body)


def sns_queue(moto_server: str) -> tuple[Any, str]:
    """An SQS queue of moto subscribed to the SMDebugRules topic: what SNS publishes lands there."""
    sqs = boto3.client("sqs", endpoint_url=moto_server, region_name="us-east-1")
    sns = boto3.client("sns", endpoint_url=moto_server, region_name="us-east-1")
    queue_url = sqs.create_queue(QueueName=f"q-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    topic = sns.create_topic(Name=SNS_TOPIC_NAME)["TopicArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn)
    return sqs, queue_url


def messages(sqs: Any, queue_url: str) -> list[dict[str, Any]]:
    got = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages", [])
    return [json.loads(m["Body"]) for m in got]


def subscriptions(moto_server: str) -> set[tuple[str, str]]:
    sns = boto3.client("sns", endpoint_url=moto_server, region_name="us-east-1")
    return {(s["Protocol"], s["Endpoint"]) for s in sns.list_subscriptions()["Subscriptions"]}


def test_email_and_sms_publish_to_the_smdebugrules_topic(moto_server: str) -> None:
    sqs, queue_url = sns_queue(moto_server)
    email, phone = f"{uuid.uuid4().hex[:6]}@example.com", "+15555550100"
    actions = parse_actions(json.dumps([{"name": "email", "endpoint": email}, {"name": "SMS", "endpoint": phone}]), "R")
    runner = ActionRunner(actions, job_name="job-sns", rule_configuration_name="MyRule", output=None,
                          sns_client=sns_client_factory(moto_server, "us-east-1"))
    runner.on_status(issues(12))
    assert [r["ok"] for r in runner.results] == [True, True], runner.results
    assert {("email", email), ("sms", phone)} <= subscriptions(moto_server)
    got = messages(sqs, queue_url)
    assert len(got) == 2  # one publish per action
    for message in got:
        assert message["Subject"] == "Debugger rule MyRule fired: job-sns"
        assert "rule MyRule of training job job-sns found an issue at step 12" in message["Message"]
    # a second firing rule subscribes nobody twice
    ActionRunner(actions, job_name="job-2", rule_configuration_name="R2", output=None,
                 sns_client=sns_client_factory(moto_server, "us-east-1")).on_status(issues(1))
    sns = boto3.client("sns", endpoint_url=moto_server, region_name="us-east-1")
    endpoints = [s["Endpoint"] for s in sns.list_subscriptions()["Subscriptions"]]
    assert endpoints.count(email) == 1


def test_a_failing_notification_is_recorded_not_fatal(tmp_path: Path) -> None:
    out = open_storage(str(tmp_path / "out"))
    actions = parse_actions('[{"name": "email", "endpoint": "a@b.com"}, {"name": "stoptraining"}]', "R")
    runner = ActionRunner(actions, job_name="j", rule_configuration_name="R", output=out,
                          sns_client=sns_client_factory("http://127.0.0.1:9", "us-east-1"))  # nothing listens
    runner.on_status(issues(3))
    email, stop = runner.results
    assert not email["ok"] and email["outcome"].startswith("failed: EndpointConnectionError")
    assert stop["ok"] and out.exists(STOP_TRAINING_KEY)  # the other actions still ran


@pytest.mark.parametrize("endpoint", [None, "http://127.0.0.1:9"])
def test_sns_client_gives_up_in_seconds_with_or_without_an_endpoint(endpoint: str | None) -> None:
    # actions run on the evaluator's loop: AWS's SNS (no endpoint) must not get botocore's 60 s waits
    config = sns_client_factory(endpoint, None)().meta.config
    assert config.connect_timeout <= 5 and config.read_timeout <= 15
    assert config.retries["total_max_attempts"] <= 4


def test_run_rule_runs_the_rules_own_action_str_and_ends_issues_found(tmp_path: Path) -> None:
    trial = write_steps(tmp_path / "trial", [(s, "TRAIN", s, {"Net_fc1.weight": np.full(2, np.nan if s == 2 else 1.0)})
                                             for s in range(5)])
    rule_file = tmp_path / "rule.py"
    rule_file.write_text(
        "from smdebug.rules.rule import Rule\n"
        "class FiresOnNaN(Rule):\n"
        "    def __init__(self, base_trial):\n"
        "        super().__init__(base_trial, action_str='[{\"name\": \"stoptraining\", \"training_job_prefix\": \"abc\"}]')\n"
        "    def invoke_at_step(self, step):\n"
        "        import numpy as np\n"
        "        return bool(np.isnan(self.base_trial.tensor('Net_fc1.weight').value(step)).any())\n")
    out = open_storage(str(tmp_path / "rule-output"))
    status = run_rule(str(trial), {"rule_to_invoke": "FiresOnNaN", "source_s3_uri": str(rule_file)},
                      rule_configuration_name="Nan", job_name="abc-1", interval=0.01, action_output=out,
                      sns_client=lambda: pytest.fail("no SNS"))
    assert status.status is Status.ISSUES_FOUND and status.last_evaluated_step == 4
    request = StopTrainingRequest.from_json(out.read(STOP_TRAINING_KEY))
    assert request.training_job_prefix == "abc" and request.step == 2


def test_bad_action_json_is_an_error_status(tmp_path: Path) -> None:
    trial = write_steps(tmp_path / "trial", [(0, "TRAIN", 0, {"Net_fc1.weight": np.ones(2)})])
    status = run_rule(str(trial), {"rule_to_invoke": "ExplodingTensor", "action_json": '[{"name": "fax"}]'},
                      rule_configuration_name="EX", job_name="j", interval=0.01)
    assert status.status is Status.ERROR
    assert status.status_details.startswith("ClientError: Rule ExplodingTensor: invalid value")
    assert "'action_json': unknown action name 'fax'" in status.status_details


@pytest.mark.slow
def test_evaluator_process_publishes_and_requests_a_stop(fixture_trials: Path, s3_client: Any, bucket: str,
                                                        moto_server: str) -> None:
    sqs, queue_url = sns_queue(moto_server)
    upload_dir(s3_client, bucket, fixture_trials / "vanishing", "out/my-job/debug-output")
    actions = [{"name": "StopTraining", "training_job_prefix": "my-"}, {"name": "Email", "endpoint": "ml@example.com"}]
    params = {"rule_to_invoke": "VanishingGradient", "action_json": json.dumps(actions)}
    proc = run_evaluator(contract(bucket, moto_server, "VG", params))  # SNS: the S3 endpoint (no AWS_ENDPOINT_URL_SNS)
    assert proc.returncode == 0, proc.stderr
    status = status_from_s3(s3_client, bucket, "VG")
    assert status["RuleEvaluationStatus"] == "IssuesFound"
    assert status["StatusDetails"].startswith("RuleEvaluationConditionMet: ")  # SageMaker's text, untouched
    body = s3_client.get_object(Bucket=bucket, Key=f"out/my-job/rule-output/VG/{STOP_TRAINING_KEY}")["Body"].read()
    request = StopTrainingRequest.from_json(body)
    assert (request.job_name, request.training_job_prefix, request.step) == ("my-job", "my-", 0)
    (message,) = messages(sqs, queue_url)
    assert "rule VG of training job my-job found an issue at step 0" in message["Message"]
