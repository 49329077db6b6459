"""Regenerate toolkit_env.json: what the REAL SageMaker training toolkit (sagemaker-training) tells a
script about the job whose config files sdlocal writes. Run with an interpreter that has it:

    python -m venv /tmp/smtk && /tmp/smtk/bin/pip install sagemaker-training==5.1.4
    python tests/launcher/data/make_toolkit_env.py /tmp/smtk/bin/python

The toolkit reads `resourceconfig.json`, `inputdataconfig.json` and `hyperparameters.json` from
SAGEMAKER_BASE_DIR (here the job folder `sdlocal.launcher.jobdir.folder.write_configs` lays out) and returns
`Environment().to_env_vars()` (the SM_* variables) and `to_cmd_args()` (the script's arguments).
The folder's path is stored as {OPT_ML}; tests/launcher/jobdir/test_training_env.py compares ours with it.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REQUEST = {
    "TrainingJobName": "toolkit-conformance",
    "AlgorithmSpecification": {"TrainingImage": "x", "TrainingInputMode": "File"},
    "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
    "InputDataConfig": [
        {"ChannelName": "training", "ContentType": "text/csv",
         "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": "s3://bucket/data/train",
                                         "S3DataDistributionType": "FullyReplicated"}}},
        {"ChannelName": "test", "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix",
                                                                "S3Uri": "s3://bucket/data/test"}}},
    ],
    "HyperParameters": {
        "lr": "0.01", "epochs": "3", "optimizer": "\"sgd\"", "use-cuda": "true", "b": "7", "nested": "{\"a\": 1}",
        "name": "plain text", "sagemaker_program": "\"train.py\"",
        "sagemaker_submit_directory": "\"s3://bucket/toolkit-conformance/source/sourcedir.tar.gz\"",
        "sagemaker_container_log_level": "20", "sagemaker_job_name": "\"toolkit-conformance\"",
        "sagemaker_region": "\"us-east-1\"", "sagemaker_distributed_dataparallel_enabled": "false",
    },
}
TOOLKIT = """
import json, os
from sagemaker_training import environment
env = environment.Environment()
print(json.dumps({"env": env.to_env_vars(), "cmd_args": env.to_cmd_args()}))
"""


def main(toolkit_python: str) -> None:
    sys.path.insert(0, str(HERE.parent.parent.parent))
    from sdlocal.launcher.jobdir.configs import write_configs
    from sdlocal.launcher.jobdir.folder import JobDir
    from sdlocal.launcher.spec.parse import spec_from_request

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "train.py").write_text("")
        spec = spec_from_request(REQUEST, base_dir=Path(tmp), check_rule_names=False)
        job_dir = JobDir(Path(tmp) / "opt-ml")
        write_configs(spec, job_dir)
        env = {"SAGEMAKER_BASE_DIR": str(job_dir.root), "TRAINING_JOB_NAME": spec.job_name, "PATH": "/usr/bin:/bin",
               "AWS_DEFAULT_REGION": "us-east-1"}
        out = subprocess.run([toolkit_python, "-c", TOOLKIT], env=env, capture_output=True, text=True, check=True)
        result = json.loads(out.stdout.splitlines()[-1].replace(str(job_dir.root), "{OPT_ML}"))
        version = subprocess.run([toolkit_python, "-c", "import importlib.metadata as m; "
                                  "print(m.version('sagemaker-training'))"], capture_output=True, text=True, check=True)
    data = {"toolkit": f"sagemaker-training {version.stdout.strip()}", "request": REQUEST, **result}
    (HERE / "toolkit_env.json").write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
