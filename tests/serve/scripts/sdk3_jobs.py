"""SageMaker Python SDK v3 (sagemaker 3.x) user scripts against `sdlocal serve`, unchanged (they
reach it only through the exports it prints):

1. ModelTrainer: SourceCode(source_dir, entry_script="train.py"), Compute(instance_type="ml.m5.xlarge"),
   with_tensorboard_output_config(); train(wait=True, logs=True). No role= given: the SDK resolves
   the caller's role and validates it (IAM/STS), then starts sm_train.sh through ContainerEntrypoint.
2. TrainingJob.create (sagemaker.core.resources) in script mode (sagemaker_program + the uploaded
   sourcedir.tar.gz) with DebugHookConfig, LossNotDecreasing and a metric definition; wait(logs=True);
   refresh() until the rule's status is final; the metric's final value.
3. TrainingJob.create with a ContainerEntrypoint (`python3 /opt/ml/input/data/code/train.py`, the
   code as a channel) and LossNotDecreasing: the zero-code hook in a script sdlocal does not start.

Prints one JSON line of what it saw, last. Usage: python sdk3_jobs.py SOURCE_DIR
"""
import io
import json
import logging
import os
import sys
import tarfile
import time

import boto3
from sagemaker.core import shapes
from sagemaker.core.resources import TrainingJob
from sagemaker.train import ModelTrainer
from sagemaker.train.configs import Compute, SourceCode

logging.basicConfig(level=logging.INFO, format="%(message)s")  # the SDK logs the job's log lines
source_dir = sys.argv[1]
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5.1-cpu-py311"
RULE_IMAGE = "503895931360.dkr.ecr.us-east-1.amazonaws.com/sagemaker-debugger-rules:latest"
ROLE = "arn:aws:iam::123456789012:role/service-role/AmazonSageMaker-ExecutionRole"
BUCKET = "sdlocal"
s3 = boto3.client("s3")
seen = {}


def tarball_members(uri):
    bucket, key = uri[len("s3://"):].split("/", 1)
    with tarfile.open(fileobj=io.BytesIO(s3.get_object(Bucket=bucket, Key=key)["Body"].read()), mode="r:gz") as tar:
        return sorted(tar.getnames())


def keys(prefix):
    return [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])]


# 1. ModelTrainer
trainer = ModelTrainer(training_image=IMAGE, source_code=SourceCode(source_dir=source_dir, entry_script="train.py"),
                       compute=Compute(instance_type="ml.m5.xlarge"), base_job_name="v3-model-trainer",
                       hyperparameters={"steps": 30}).with_tensorboard_output_config()
seen["trainer_role"] = trainer.role
trainer.train(wait=True, logs=True)
job = trainer._latest_training_job
job.refresh()
seen["trainer"] = {"name": job.training_job_name, "status": job.training_job_status,
                   "entrypoint": job.algorithm_specification.container_entrypoint,
                   "model": tarball_members(job.model_artifacts.s3_model_artifacts),
                   "tensorboard": job.tensor_board_output_config.s3_output_path}
tb_bucket, tb_prefix = job.tensor_board_output_config.s3_output_path[len("s3://"):].split("/", 1)
seen["trainer"]["tensorboard_keys"] = [o["Key"] for o in s3.list_objects_v2(
    Bucket=tb_bucket, Prefix=f"{tb_prefix.rstrip('/')}/{job.training_job_name}/tensorboard-output/").get("Contents", [])]


def create(name, hyper_parameters, algorithm, channels=()):
    return TrainingJob.create(
        training_job_name=name, role_arn=ROLE, algorithm_specification=algorithm,
        hyper_parameters=hyper_parameters, input_data_config=list(channels) or None,
        output_data_config=shapes.OutputDataConfig(s3_output_path=f"s3://{BUCKET}/v3-output"),
        resource_config=shapes.ResourceConfig(instance_type="ml.m5.xlarge", instance_count=1, volume_size_in_gb=30),
        stopping_condition=shapes.StoppingCondition(max_runtime_in_seconds=1800),
        debug_hook_config=shapes.DebugHookConfig(
            s3_output_path=f"s3://{BUCKET}/v3-debug",
            collection_configurations=[shapes.CollectionConfiguration(
                collection_name="losses", collection_parameters={"save_interval": "2"})]),
        debug_rule_configurations=[shapes.DebugRuleConfiguration(
            rule_configuration_name="LossNotDecreasing", rule_evaluator_image=RULE_IMAGE,
            rule_parameters={"rule_to_invoke": "LossNotDecreasing", "num_steps": "4"})],
    )


def until_rules_final(job, timeout=300):
    deadline = time.time() + timeout
    while True:
        job.refresh()
        statuses = job.debug_rule_evaluation_statuses or []
        if statuses and all(s.rule_evaluation_status != "InProgress" for s in statuses) or time.time() > deadline:
            return {s.rule_configuration_name: s.rule_evaluation_status for s in statuses}
        time.sleep(3)


# 2. TrainingJob.create in script mode, with LossNotDecreasing
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w:gz") as tar:
    tar.add(os.path.join(source_dir, "train.py"), arcname="train.py")
s3.put_object(Bucket=BUCKET, Key="v3-source/sourcedir.tar.gz", Body=buf.getvalue())
name = f"v3-create-{int(time.time())}"
job = create(name, {"sagemaker_program": '"train.py"', "sagemaker_submit_directory": f'"s3://{BUCKET}/v3-source/sourcedir.tar.gz"',
                    "steps": "30"},
             shapes.AlgorithmSpecification(training_image=IMAGE, training_input_mode="File", metric_definitions=[
                 shapes.MetricDefinition(name="train:loss", regex=r"loss=([0-9.]+)")]))
job.wait(logs=True)
seen["script_mode"] = {"name": name, "status": job.training_job_status, "rules": until_rules_final(job),
                       "final_metrics": {m.metric_name: m.value for m in job.final_metric_data_list or []}}

# 3. TrainingJob.create with a ContainerEntrypoint and the code as a channel
for path in os.listdir(source_dir):
    s3.upload_file(os.path.join(source_dir, path), BUCKET, f"v3-code/{path}")
name = f"v3-entrypoint-{int(time.time())}"
code = shapes.Channel(channel_name="code", data_source=shapes.DataSource(s3_data_source=shapes.S3DataSource(
    s3_data_type="S3Prefix", s3_uri=f"s3://{BUCKET}/v3-code/", s3_data_distribution_type="FullyReplicated")))
job = create(name, {"steps": "30"}, shapes.AlgorithmSpecification(
    training_image=IMAGE, training_input_mode="File", container_entrypoint=["python3"],
    container_arguments=["/opt/ml/input/data/code/train.py", "--steps", "30"]), channels=[code])
job.wait(logs=True)
seen["entrypoint"] = {"name": name, "status": job.training_job_status, "rules": until_rules_final(job),
                      "tensors": len(keys(f"v3-debug/{name}/debug-output/index/"))}
print("SDK-RESULT " + json.dumps(seen))
