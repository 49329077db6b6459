"""smdebug's TrainingJob of the profiling notebooks: a training job's profiler output, found through
DescribeTrainingJob (real SageMaker, or `sdlocal serve` through AWS_ENDPOINT_URL), and waiting
for its first system and framework files.

    tj = TrainingJob(training_job_name, region)
    tj.wait_for_sys_profiling_data_to_be_available()        # deadline: timeout= (30 min)
    tj.wait_for_framework_profiling_data_to_be_available()
    pf = PandasFrame(tj.profiler_s3_output_path)

Clients are made with boto3's own resolution (the user's AWS settings and endpoint variables),
or injected (`sm_client=`). Differences from smdebug: every wait has a deadline
(ProfilerDataTimeout) and ends at once with it when the job ends without the data; a job without
a ProfilerConfig is one error naming the job (smdebug looped forever); importing this module does
not need bokeh.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sdlocal.evaluator.analysis.events import human_time
from sdlocal.evaluator.analysis.readers import (
    MetricsReaderBase,
    S3AlgorithmMetricsReader,
    S3SystemMetricsReader,
)
from sdlocal.evaluator.errors import AnalysisError, ProfilerDataTimeout

WAIT_TIMEOUT_S = 1800.0
POLL_INTERVAL_S = 10.0
FINAL_STATUSES = frozenset({"Completed", "Failed", "Stopped"})


class TrainingJob:
    def __init__(self, training_job_name: str, region: str | None = None, *, sm_client: Any = None,
                 s3_client: Any = None, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.name = training_job_name
        self.region = region
        self._sm_client = sm_client
        self._s3_client = s3_client
        self._sleep, self._clock = sleep, clock
        self.profiler_config: dict[str, Any] | None = None
        self.profiler_s3_output_path: str | None = None
        self.system_metrics_reader: S3SystemMetricsReader | None = None
        self.framework_metrics_reader: S3AlgorithmMetricsReader | None = None
        self.profiler_config, self.profiler_s3_output_path = self.get_config_and_profiler_s3_output_path()

    def get_sm_client(self) -> Any:
        if self._sm_client is None:
            import boto3

            self._sm_client = boto3.client("sagemaker", region_name=self.region)
        return self._sm_client

    def get_systems_metrics_reader(self) -> S3SystemMetricsReader | None:
        return self.system_metrics_reader

    def get_framework_metrics_reader(self) -> S3AlgorithmMetricsReader | None:
        return self.framework_metrics_reader

    def describe_training_job(self) -> dict[str, Any]:
        return dict(self.get_sm_client().describe_training_job(TrainingJobName=self.name))

    def get_config_and_profiler_s3_output_path(self) -> tuple[dict[str, Any], str]:
        """The job's ProfilerConfig and `<S3OutputPath>/<job>/profiler-output`."""
        if self.profiler_config is not None and self.profiler_s3_output_path is not None:
            return self.profiler_config, self.profiler_s3_output_path
        self.ds = self.describe_training_job()
        config = self.ds.get("ProfilerConfig") or {}
        if "S3OutputPath" not in config:
            raise AnalysisError(f"training job {self.name} has no ProfilerConfig.S3OutputPath: it was created "
                                "without profiling, so there is no profiler output to read")
        path = f"{config['S3OutputPath'].rstrip('/')}/{self.name}/profiler-output"
        print(f"ProfilerConfig:{config}")
        print(f"s3 path:{path}")
        return config, path

    def _wait(self, what: str, make: Callable[[], MetricsReaderBase], timeout: float, interval: float
              ) -> MetricsReaderBase:
        deadline = self._clock() + timeout
        reader = make()
        last = ("", "")
        while reader.get_timestamp_of_latest_available_file() == 0:
            desc = self.describe_training_job()
            status = (str(desc.get("TrainingJobStatus", "")), str(desc.get("SecondaryStatus", "")))
            if status != last:
                print(f"time: {time.time()} TrainingJobStatus:{status[0]} TrainingJobSecondaryStatus:{status[1]}")
                last = status
            if status[0] in FINAL_STATUSES:
                reader.refresh_event_file_list()  # the last upload came before the final status
                if reader.get_timestamp_of_latest_available_file():
                    break
                raise ProfilerDataTimeout(f"training job {self.name} ended ({status[0]}) without {what} profiling "
                                          f"data under {self.profiler_s3_output_path}")
            if self._clock() >= deadline:
                raise ProfilerDataTimeout(f"no {what} profiling data under {self.profiler_s3_output_path} within "
                                          f"{timeout:g} s (training job {self.name}: {status[0]})")
            print(f"Profiler data from {what} not available yet")
            self._sleep(interval)
            reader.refresh_event_file_list()
        print(f"\n\nProfiler data from {what} is available")
        return reader

    def wait_for_sys_profiling_data_to_be_available(self, timeout: float = WAIT_TIMEOUT_S,
                                                    interval: float = POLL_INTERVAL_S) -> None:
        path = str(self.profiler_s3_output_path)
        reader = self._wait("system", lambda: S3SystemMetricsReader(path, s3_client=self._s3_client),
                            timeout, interval)
        assert isinstance(reader, S3SystemMetricsReader)
        self.system_metrics_reader = reader

    def wait_for_framework_profiling_data_to_be_available(self, timeout: float = WAIT_TIMEOUT_S,
                                                          interval: float = POLL_INTERVAL_S) -> None:
        path = str(self.profiler_s3_output_path)
        reader = self._wait("framework", lambda: S3AlgorithmMetricsReader(path, s3_client=self._s3_client),
                            timeout, interval)
        assert isinstance(reader, S3AlgorithmMetricsReader)
        self.framework_metrics_reader = reader
        last = reader.get_timestamp_of_latest_available_file()
        print(f"Found recorded framework annotations. Latest available timestamp microsseconds_since_epoch is:{last} , "
              f"human_readable_timestamp in utc: {human_time(last)}")
