"""An SDK v2 user script, unchanged for sdlocal: it knows nothing of it and reaches it only through
the exports `sdlocal serve` prints (AWS_ENDPOINT_URL, credentials, region, the SDK config file).

Job "stopped": fit(wait=False), then stop() while it trains. Job "fired": fit() with logs and three
rules (ExplodingTensor with a StopTraining action, VanishingGradient, a custom rule); the training
diverges, the rule stops it. Then attach() to both. Prints one JSON line of what it saw, last.

Usage: python sdk_job.py SOURCE_DIR CUSTOM_RULE_FILE
"""
import json
import sys
import time

from sagemaker.debugger import CollectionConfig, DebuggerHookConfig, Rule, rule_configs
from sagemaker.pytorch import PyTorch

source_dir, rule_file = sys.argv[1], sys.argv[2]
ROLE = "arn:aws:iam::123456789012:role/service-role/AmazonSageMaker-ExecutionRole"


def estimator(hyperparameters, rules):
    return PyTorch(
        entry_point="train.py", source_dir=source_dir, role=ROLE, framework_version="2.1", py_version="py310",
        instance_count=1, instance_type="ml.m5.xlarge", hyperparameters=hyperparameters, rules=rules,
        debugger_hook_config=DebuggerHookConfig(
            hook_parameters={"save_interval": "2"},
            collection_configs=[CollectionConfig("losses", parameters={"save_interval": "1"}),
                                CollectionConfig("gradients", parameters={"save_interval": "2"})]),
    )


seen = {}

# 1. stop(): a job that would stall for minutes
slow = estimator({"steps": 400, "stall-at-step": 20, "stall-seconds": 300},
                 [Rule.sagemaker(rule_configs.loss_not_decreasing())])
slow.fit(wait=False)
deadline = time.time() + 120
while slow.latest_training_job.describe()["SecondaryStatus"] != "Training" and time.time() < deadline:
    time.sleep(1)
slow.latest_training_job.stop()
seen["stopped_job"] = slow.latest_training_job.name

# 2. fit() with rules: the training diverges, ExplodingTensor's StopTraining action ends it
stop_training = rule_configs.ActionList(rule_configs.StopTraining())
rules = [
    Rule.sagemaker(rule_configs.exploding_tensor(), actions=stop_training),
    Rule.sagemaker(rule_configs.vanishing_gradient()),
    Rule.custom(name="CustomGradientRule", source=rule_file, rule_to_invoke="CustomGradientRule",
                image_uri="864354269164.dkr.ecr.us-east-1.amazonaws.com/sagemaker-debugger-rule-evaluator:latest",
                instance_type="ml.t3.medium", volume_size_in_gb=5, rule_parameters={"threshold": "1e30"}),
]
fired = estimator({"steps": 400, "lr": 1e5, "stall-at-step": 60, "stall-seconds": 300}, rules)
fired.fit(logs="All")
job = fired.latest_training_job
seen["fired_job"] = job.name
seen["fired_status"] = job.describe()["TrainingJobStatus"]
seen["artifacts_path"] = fired.latest_job_debugger_artifacts_path()
deadline = time.time() + 120  # the rules finish their evaluation after the training stopped
while any(r["RuleEvaluationStatus"] == "InProgress" for r in job.rule_job_summary()) and time.time() < deadline:
    time.sleep(2)
seen["summary"] = [{k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in r.items()}
                   for r in job.rule_job_summary()]
seen["summary_types"] = sorted({type(r["LastModifiedTime"]).__name__ for r in job.rule_job_summary()})

# 3. attach() to both
for key in ("stopped_job", "fired_job"):
    attached = PyTorch.attach(seen[key])
    description = attached.latest_training_job.describe()
    seen[f"attached_{key}"] = {"status": description["TrainingJobStatus"],
                               "framework_version": attached.framework_version,
                               "entry_point": attached.entry_point,
                               "transitions": [t["Status"] for t in description["SecondaryStatusTransitions"]]}
print("SDK-RESULT " + json.dumps(seen))
