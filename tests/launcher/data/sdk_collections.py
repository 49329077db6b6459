"""Run with the side virtualenv's python (the real SageMaker Python SDK v2): builds the
CreateTrainingJob request of an estimator with a built-in rule and the user's own CollectionConfig
for the rule's collection, without sending it, and prints its DebugHookConfig and
DebugRuleConfigurations as one JSON line. The order of CollectionConfigurations depends on
PYTHONHASHSEED (the SDK de-duplicates the rules' and the user's entries through a set).

Usage: PYTHONHASHSEED=N python sdk_collections.py
"""
import json

import boto3
from sagemaker.debugger import CollectionConfig, DebuggerHookConfig, Rule, rule_configs
from sagemaker.estimator import Estimator, _TrainingJob
from sagemaker.session import Session

session = Session(boto_session=boto3.Session(region_name="us-east-1", aws_access_key_id="x",
                                             aws_secret_access_key="x"))
estimator = Estimator(
    image_uri="763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.1.0-cpu-py310",
    role="arn:aws:iam::123456789012:role/service-role/AmazonSageMaker-ExecutionRole",
    instance_count=1, instance_type="ml.m5.xlarge", output_path="s3://sdlocal/jobs", sagemaker_session=session,
    rules=[Rule.sagemaker(rule_configs.loss_not_decreasing())],
    debugger_hook_config=DebuggerHookConfig(
        hook_parameters={"save_interval": "10"},
        collection_configs=[CollectionConfig("losses", parameters={"save_interval": "5"})]),
)
estimator._prepare_for_training(job_name="sdk-collections")
request = session._get_train_request(**_TrainingJob._get_train_args(estimator, None, {}))
print("SDK-REQUEST " + json.dumps({k: request[k] for k in ("DebugHookConfig", "DebugRuleConfigurations")}))
