"""An SDK v2 user script in the style of SageMaker's multi-node Debugger profiling example, unchanged
for sdlocal: PyTorch on 2 instances with torch_distributed (2 processes per host: the toolkit's
sagemaker_mpi_num_of_processes_per_host, the way to ask for several on CPU), LossNotDecreasing,
LowGPUUtilization and ProfilerReport, fit(logs=True). Then a distribution sdlocal does not run
(parameter_server): fit() must raise. Prints one JSON line of what it saw, last.

The SDK accepts torch_distributed only on GPU (or Trainium) instance types: ml.g4dn.xlarge here;
sdlocal runs it on what this machine has.

Usage: python sdk_distributed_job.py SOURCE_DIR
"""
import json
import sys
import time

from botocore.exceptions import ClientError
from sagemaker.debugger import DebuggerHookConfig, ProfilerConfig, ProfilerRule, Rule, rule_configs
from sagemaker.pytorch import PyTorch

source_dir = sys.argv[1]
ROLE = "arn:aws:iam::123456789012:role/service-role/AmazonSageMaker-ExecutionRole"
seen = {}

estimator = PyTorch(
    entry_point="train_ddp.py", source_dir=source_dir, role=ROLE, framework_version="2.1.0", py_version="py310",
    instance_count=2, instance_type="ml.g4dn.xlarge",
    distribution={"torch_distributed": {"enabled": True}},
    hyperparameters={"epochs": 2, "sagemaker_mpi_num_of_processes_per_host": 2},
    debugger_hook_config=DebuggerHookConfig(hook_parameters={"include_workers": "all", "save_interval": "1"}),
    profiler_config=ProfilerConfig(system_monitor_interval_millis=500),
    rules=[Rule.sagemaker(rule_configs.loss_not_decreasing()),
           ProfilerRule.sagemaker(rule_configs.LowGPUUtilization()),
           ProfilerRule.sagemaker(rule_configs.ProfilerReport())],
)
estimator.fit(logs=True)
job = estimator.latest_training_job
description = job.describe()
seen["job"] = job.name
seen["status"] = description["TrainingJobStatus"]
seen["instance_count"] = description["ResourceConfig"]["InstanceCount"]
seen["artifacts_path"] = estimator.latest_job_debugger_artifacts_path()
deadline = time.time() + 180  # rules may finish after the training
while any(r["RuleEvaluationStatus"] == "InProgress" for r in job.rule_job_summary()) and time.time() < deadline:
    time.sleep(2)
seen["summary"] = {r["RuleConfigurationName"]: r["RuleEvaluationStatus"] for r in job.rule_job_summary()}

unsupported = PyTorch(
    entry_point="train_ddp.py", source_dir=source_dir, role=ROLE, framework_version="2.1.0", py_version="py310",
    instance_count=2, instance_type="ml.m5.xlarge", distribution={"parameter_server": {"enabled": True}})
try:
    unsupported.fit(wait=False)
    seen["unsupported"] = "accepted"
except ClientError as e:
    seen["unsupported"] = {"code": e.response["Error"]["Code"], "message": e.response["Error"]["Message"]}
print("SDK-RESULT " + json.dumps(seen))
