"""A job's metrics reach moto's CloudWatch however large the batch: botocore compresses request
bodies from 10 KiB on, which moto's server cannot read (a 500), so serve's clients send them plain."""
from __future__ import annotations

import datetime

from sdlocal.launcher.serve.app import local_client


def test_a_batch_over_10_kib_is_put_and_listed(moto_server: str) -> None:
    cloudwatch = local_client("cloudwatch", moto_server)
    now = datetime.datetime.now(datetime.timezone.utc)
    data = [{"MetricName": "train:rmse", "Value": float(i), "Timestamp": now - datetime.timedelta(seconds=i),
             "Dimensions": [{"Name": "Host", "Value": "algo-1"}, {"Name": "TrainingJobName", "Value": "big-batch"}]}
            for i in range(300)]  # about 40 KB of JSON
    cloudwatch.put_metric_data(Namespace="/aws/sagemaker/TrainingJobs", MetricData=data)
    listed = cloudwatch.list_metrics(Namespace="/aws/sagemaker/TrainingJobs", MetricName="train:rmse")["Metrics"]
    assert any({"Name": "TrainingJobName", "Value": "big-batch"} in m["Dimensions"] for m in listed)
