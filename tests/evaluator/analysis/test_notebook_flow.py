"""The analysis cells of smdebug's profiling notebooks, written by us with the same calls and
arguments, run in this venv against jobs sdlocal ran: a job created through `sdlocal serve`
(found by TrainingJob through AWS_ENDPOINT_URL, as on SageMaker), its frames, statistics and merged
timeline; PandasFrame over the embedded S3; create_trial(profiler=True); and the one-line error
when the `analysis` extra is missing."""
from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.conftest import REPO_ROOT
from tests.evaluator.analysis.conftest import HYPERPARAMETERS, ProfiledJob

pytestmark = pytest.mark.slow


@pytest.fixture
def serve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    from sdlocal.launcher.serve.app import ServeServer

    srv = ServeServer(tmp_path / "home", port=0, runtime="process", echo=lambda line: None)
    srv.start()
    monkeypatch.setenv("AWS_ENDPOINT_URL", srv.url)  # what `sdlocal serve` tells a notebook to export
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    try:
        yield srv.url
    finally:
        assert srv.stop(timeout=120) == []


def _create_profiled_job(name: str) -> None:
    s3, sm = boto3.client("s3"), boto3.client("sagemaker")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(REPO_ROOT / "examples" / "train.py", arcname="train.py")
    s3.put_object(Bucket="sdlocal", Key=f"{name}/source/sourcedir.tar.gz", Body=buf.getvalue())
    sm.create_training_job(
        TrainingJobName=name, RoleArn="arn:aws:iam::123456789012:role/r",
        AlgorithmSpecification={"TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:"
                                                 "2.1.0-cpu-py310", "TrainingInputMode": "File"},
        HyperParameters={"sagemaker_program": '"train.py"',
                         "sagemaker_submit_directory": f'"s3://sdlocal/{name}/source/sourcedir.tar.gz"',
                         **{k: json.dumps(v) for k, v in HYPERPARAMETERS.items()}},
        OutputDataConfig={"S3OutputPath": "s3://sdlocal/"},
        ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
        StoppingCondition={"MaxRuntimeInSeconds": 600},
        ProfilerConfig={"S3OutputPath": "s3://sdlocal/profiler", "ProfilingIntervalInMilliseconds": 500})


def test_training_job_through_serve_then_the_notebook_cells(serve: str, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    name = "analysis-served"
    _create_profiled_job(name)
    # --- interactive_analysis_profiling_data / analyze_performance_bottlenecks, cell by cell ---
    from smdebug.profiler.analysis.notebook_utils.training_job import TrainingJob

    region = "us-east-1"
    tj = TrainingJob(name, region)
    assert tj.profiler_s3_output_path == f"s3://sdlocal/profiler/{name}/profiler-output"
    assert tj.profiler_config["ProfilingIntervalInMilliseconds"] == 500
    tj.wait_for_sys_profiling_data_to_be_available(interval=1)
    tj.wait_for_framework_profiling_data_to_be_available(interval=1)
    out = capsys.readouterr().out
    assert "Profiler data from system is available" in out and "Found recorded framework annotations" in out

    # the job ends; the pandas cells read all of it
    deadline = time.monotonic() + 240
    while tj.describe_training_job()["TrainingJobStatus"] == "InProgress" and time.monotonic() < deadline:
        time.sleep(1)
    assert tj.describe_training_job()["TrainingJobStatus"] == "Completed"
    from smdebug.profiler.analysis.utils.pandas_data_analysis import PandasFrameAnalysis, StatsBy
    from smdebug.profiler.analysis.utils.profiler_data_to_pandas import PandasFrame

    pf = PandasFrame(tj.profiler_s3_output_path)
    system_metrics_df = pf.get_all_system_metrics()
    framework_metrics_df = pf.get_all_framework_metrics(
        selected_framework_metrics=["Step:ModeKeys.TRAIN", "Step:ModeKeys.GLOBAL"])
    assert len(system_metrics_df) > 20 and len(framework_metrics_df) == 300
    assert list(system_metrics_df.columns) == ["timestamp", "timestamp_us", "value", "system_metric", "dimension",
                                               "nodeID", "type"]
    pf_analysis = PandasFrameAnalysis(system_metrics_df, framework_metrics_df)
    job_statistics = pf_analysis.get_job_statistics()
    assert job_statistics["training_loop_start"] < job_statistics["training_loop_end"] <= job_statistics["end_time"]
    assert 0 < job_statistics["training_loop_%"] < 100
    step_stats = pf_analysis.get_step_statistics(by=StatsBy.TRAINING_PHASE)
    assert step_stats["training_phase"].tolist() == ["Step:ModeKeys.TRAIN"]
    assert step_stats["duration_max_us"].iloc[0] >= step_stats["duration_p50_us"].iloc[0] > 0
    util = pf_analysis.get_utilization_stats()
    assert "cpu" in set(util["Resource"]) and (util["utilization_max"] >= util["utilization_min"]).all()
    util_stats = pf_analysis.get_utilization_stats(by=StatsBy.TRAINING_PHASE)
    pivoted = util_stats.pivot(index="Training_phase", columns="Resource", values="utilization_mean").reset_index()
    assert "Step:ModeKeys.TRAIN" in set(pivoted["Training_phase"]) and "cpu" in pivoted.columns
    cpus = system_metrics_df[system_metrics_df["system_metric"].str.match("cpu")]
    high_cpu = cpus[cpus["value"] > 90.0]
    busy = pf.get_framework_metrics_by_timesteps(high_cpu["timestamp"].unique())
    assert len(busy) == 3
    train_steps = framework_metrics_df[framework_metrics_df["framework_metric"].isin(["Step:ModeKeys.TRAIN"])]
    step_durations = train_steps["end_time_us"] - train_steps["start_time_us"]
    outliers_train_steps = train_steps[step_durations > step_durations.median() * 2.0]
    results = pf.get_framework_metrics_by_begin_and_end_timesteps(outliers_train_steps["start_time"],
                                                                  outliers_train_steps["end_time"])
    assert set(results[0]) <= {"Forward", "Backward(post-forward)"} and max(results[0].values()) == 1.0

    # --- the merged timeline cell: a Chrome trace with events of every source ---
    from smdebug.profiler.analysis.utils.merge_timelines import MergedTimeline, MergeUnit

    start_step, end_step = 1, 10
    combined_timeline = MergedTimeline(tj.profiler_s3_output_path, output_directory=str(tmp_path))
    path = combined_timeline.merge_timeline(start_step, end_step, unit=MergeUnit.STEP)
    trace = json.loads(Path(path).read_text())
    steps = sorted(e["args"]["step_num"] for e in trace if e.get("name") == "Step:ModeKeys.TRAIN" and e["ph"] == "X")
    assert steps == list(range(1, 10))
    everything = MergedTimeline(tj.profiler_s3_output_path, output_directory=str(tmp_path))
    first = pf.system_metrics_reader.get_timestamp_of_first_available_file()
    trace = json.loads(Path(everything.merge_timeline(first, first + 3_600_000_000)).read_text())
    check_chrome_trace(trace)


def check_chrome_trace(trace: list[dict[str, Any]]) -> None:
    """A trace chrome://tracing and Perfetto open: a JSON array of events with the fields each
    phase needs, processes named, and events of every source: each phase of the framework timeline
    and the system metrics (counters)."""
    assert isinstance(trace, list) and trace
    names = {e["pid"]: e["args"]["name"] for e in trace if e["ph"] == "M" and e["name"] == "process_name"}
    for e in trace:
        assert {"name", "ph", "pid"} <= set(e), e
        if e["ph"] == "X":
            assert isinstance(e["ts"], int) and e["dur"] >= 0 and isinstance(e["tid"], int) and e["pid"] in names
        elif e["ph"] == "C":
            assert isinstance(e["args"]["value"], float) and e["pid"] in names
    phases = {names[e["pid"]] for e in trace if e["ph"] == "X"}
    assert {"Step:ModeKeys.TRAIN", "Step:ModeKeys.EVAL", "Forward", "Backward(post-forward)"} <= phases
    counters = {e["name"] for e in trace if e["ph"] == "C"}
    assert {"cpu0_CPUUtilization_algo-1", "MemoryUsedPercent__algo-1"} <= counters


def test_pandas_frame_over_the_embedded_s3_and_profiler_trials(profiled_job: ProfiledJob, s3_env: str) -> None:
    from smdebug.profiler.analysis.utils.profiler_data_to_pandas import PandasFrame
    from smdebug.trials import create_trial

    pf = PandasFrame(profiled_job.s3_uri)  # through AWS_ENDPOINT_URL_S3, as a notebook on the user's machine
    local = PandasFrame(str(profiled_job.local))
    assert pf.get_all_system_metrics().equals(local.get_all_system_metrics())
    s3_fw, local_fw = pf.get_all_framework_metrics(), local.get_all_framework_metrics()
    assert s3_fw.equals(local_fw) and len(s3_fw) > 600
    assert set(s3_fw["process"]) == {"Step:ModeKeys.TRAIN", "Step:ModeKeys.EVAL", "Forward", "Backward(post-forward)"}
    by_step_sys, by_step_fw = pf.get_profiler_data_by_step(5, 8)
    assert set(by_step_fw["step"]) == {5, 6, 7, 8}

    trial = create_trial(profiled_job.s3_uri, profiler=True)
    assert trial.job_finished()  # the end markers are in S3
    latest = trial.get_latest_timestamp()
    assert trial.first_timestamp < latest
    assert trial.get_system_metrics(trial.first_timestamp, latest)
    assert {e.event_phase for e in trial.get_framework_metrics(trial.first_timestamp, latest)} >= {"Forward"}
    trial.wait_for_data(latest, trial.first_timestamp)  # there already: returns


def test_a_missing_extra_is_one_line_naming_it(profiled_job: ProfiledJob, tmp_path: Path) -> None:
    code = ("import sys; sys.modules['pandas'] = None\n"  # as if pandas were not installed
            "from smdebug.profiler.analysis.notebook_utils.training_job import TrainingJob\n"  # needs neither
            "from smdebug.profiler.analysis.utils.profiler_data_to_pandas import PandasFrame\n"
            f"PandasFrame({str(profiled_job.local)!r})\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.endswith("pandas is not installed: the profiler analysis API needs it (pip install 'sdlocal[analysis]')")
    code = ("import sys; sys.modules['bokeh'] = None\n"
            "from smdebug.profiler.analysis.notebook_utils.metrics_histogram import MetricsHistogram\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr  # importing is fine: bokeh is needed to draw
    code += "MetricsHistogram(None)\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert "bokeh is not installed" in proc.stderr.strip().splitlines()[-1] and "sdlocal[analysis]" in proc.stderr
