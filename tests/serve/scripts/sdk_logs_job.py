"""An SDK v2 script against `sdlocal serve`: a job whose training prints many lines (blank ones
among them), its log shown by fit(logs=True), then read again with Session().logs_for_job(job,
wait=True) once the job ended. Prints one JSON line, last: the job's name and both outputs.

Usage: python sdk_logs_job.py SOURCE_DIR
"""
import contextlib
import io
import json
import sys

import sagemaker
from sagemaker.pytorch import PyTorch

ROLE = "arn:aws:iam::123456789012:role/service-role/AmazonSageMaker-ExecutionRole"

estimator = PyTorch(entry_point="print_lines.py", source_dir=sys.argv[1], role=ROLE, framework_version="2.1",
                    py_version="py310", instance_count=1, instance_type="ml.m5.xlarge",
                    hyperparameters={"lines": 1200}, disable_profiler=True, debugger_hook_config=False)
fit_out = io.StringIO()
with contextlib.redirect_stdout(fit_out):
    estimator.fit(logs=True)
job = estimator.latest_training_job.name
logs_out = io.StringIO()
with contextlib.redirect_stdout(logs_out):
    sagemaker.session.Session().logs_for_job(job, wait=True)
print("SDK-LOGS " + json.dumps({"job": job, "fit": fit_out.getvalue(), "logs_for_job": logs_out.getvalue()}))
