"""The xgboost_builtin_rules notebook's setup, unchanged for sdlocal (the real SDK v2): SageMaker's
built-in XGBoost algorithm from its image URI, abalone CSV channels uploaded to the session's
bucket, the notebook's hyperparameters, Debugger collections and rules (LossNotDecreasing,
Overtraining, CreateXgboostReport). Then a job with a bad hyperparameter, which CreateTrainingJob
must refuse. Prints one JSON line of what it saw, last.

Usage: python sdk_xgboost_job.py TRAIN_CSV VALIDATION_CSV
"""
import io
import json
import sys
import tarfile
import time

import boto3
import sagemaker
from botocore.exceptions import ClientError
from sagemaker import image_uris
from sagemaker.debugger import CollectionConfig, DebuggerHookConfig, Rule, rule_configs
from sagemaker.estimator import Estimator
from sagemaker.inputs import TrainingInput

ROLE = "arn:aws:iam::123456789012:role/service-role/AmazonSageMaker-ExecutionRole"
train_csv, validation_csv = sys.argv[1], sys.argv[2]
session = sagemaker.Session()
bucket, region = session.default_bucket(), session.boto_region_name
prefix = "demo-smdebug-xgboost-regression"
s3_train = session.upload_data(train_csv, bucket, f"{prefix}/train")
s3_validation = session.upload_data(validation_csv, bucket, f"{prefix}/validation")
container = image_uris.retrieve("xgboost", region, "1.7-1")
save_interval = 2
hyperparameters = {"max_depth": "5", "eta": "0.2", "gamma": "4", "min_child_weight": "6", "subsample": "0.7",
                   "objective": "reg:squarederror", "num_round": "51"}


def estimator(hps):
    return Estimator(
        role=ROLE, base_job_name=prefix, instance_count=1, instance_type="ml.m5.4xlarge", image_uri=container,
        hyperparameters=hps, max_run=1800,
        debugger_hook_config=DebuggerHookConfig(
            s3_output_path=f"s3://{bucket}/{prefix}/debug",
            collection_configs=[CollectionConfig(name="metrics", parameters={"save_interval": str(save_interval)}),
                                CollectionConfig(name="feature_importance",
                                                 parameters={"save_interval": str(save_interval)}),
                                CollectionConfig(name="full_shap", parameters={"save_interval": str(save_interval)}),
                                CollectionConfig(name="average_shap",
                                                 parameters={"save_interval": str(save_interval)})]),
        rules=[Rule.sagemaker(rule_configs.loss_not_decreasing(),
                              rule_parameters={"collection_names": "metrics", "num_steps": str(save_interval * 2)}),
               Rule.sagemaker(rule_configs.overtraining(),
                              rule_parameters={"patience_validation": str(save_interval * 5)}),
               Rule.sagemaker(rule_configs.create_xgboost_report())],
    )


channels = {"train": TrainingInput(s3_train, content_type="text/csv"),
            "validation": TrainingInput(s3_validation, content_type="text/csv")}
seen = {"image": container}
xgb = estimator(hyperparameters)
xgb.fit(channels, wait=True, logs="All")
job = xgb.latest_training_job
deadline = time.time() + 300  # the rules finish their evaluation after the training
while any(r["RuleEvaluationStatus"] == "InProgress" for r in job.rule_job_summary()) and time.time() < deadline:
    time.sleep(3)
description = job.describe()
seen["job"] = job.name
seen["status"] = description["TrainingJobStatus"]
seen["rules"] = {r["RuleConfigurationName"]: r["RuleEvaluationStatus"] for r in job.rule_job_summary()}
seen["final_metrics"] = {m["MetricName"]: m["Value"] for m in description.get("FinalMetricDataList", [])}
seen["metric_definitions"] = [d["Name"] for d in description["AlgorithmSpecification"].get("MetricDefinitions", [])]
frame = xgb.training_job_analytics.dataframe()
seen["analytics"] = sorted(set(frame["metric_name"])) if len(frame) else []
s3 = boto3.client("s3")
artifact = description["ModelArtifacts"]["S3ModelArtifacts"]
body = s3.get_object(Bucket=artifact.split("/")[2], Key=artifact.split("/", 3)[3])["Body"].read()
with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
    seen["model_members"] = tar.getnames()
base = f"{prefix}/debug/{job.name}/rule-output/CreateXgboostReport/"
keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=base).get("Contents", [])]
seen["report_keys"] = [k[len(base):] for k in keys]
report = [k for k in keys if k.endswith("xgboost_report.html")]
seen["report_bytes"] = len(s3.get_object(Bucket=bucket, Key=report[0])["Body"].read()) if report else 0

# a bad hyperparameter: refused by CreateTrainingJob, in the SDK's face, at fit()
try:
    estimator({**hyperparameters, "max_depth": "-3"}).fit(channels, wait=False)
    seen["bad_hyperparameter"] = "accepted"
except ClientError as e:
    seen["bad_hyperparameter"] = {"code": e.response["Error"]["Code"], "message": e.response["Error"]["Message"]}
print("SDK-RESULT " + json.dumps(seen))
