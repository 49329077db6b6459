"""The job's lifecycle with profiling, for real: the process runtime runs a real Python training
(the interpreter of this venv, trial/ importable) against a real moto server, while the platform's
system sampler writes SageMaker's files into the job folder and the uploader copies them to S3 as
they close. The script also writes a framework trace where profilerconfig.json's LocalPath says, as
the hook will. Success, a crash and a stop each end with the sampler stopped, every file closed
and uploaded, both profiler end markers written after the final upload, and no thread left."""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from sdlocal.launcher.job.run import RunOptions, run_job
from sdlocal.launcher.jobdir.folder import JobDir
from sdlocal.launcher.runtime import ProcessRuntime
from sdlocal.launcher.s3.endpoint import S3Endpoint
from sdlocal.launcher.spec.model import JobSpec
from sdlocal.launcher.spec.parse import spec_from_request
from sdlocal.trial.profiler import ProfilerReader
from tests.launcher._procs import gone

TRAIN = r'''
import json, os, sys, time
from sdlocal.trial.profiler import TraceWriter, now_us
marks = os.environ["MARKS_DIR"]
open(os.path.join(marks, "pid"), "w").write(str(os.getpid()))
config = json.load(open(os.environ["SMPROFILER_CONFIG_PATH"]))
json.dump(config, open(os.path.join(marks, "profilerconfig.json"), "w"))
trace = TraceWriter(config["ProfilingParameters"]["LocalPath"], "0-algo-1", close_interval_s=0.5)
seconds = float(sys.argv[sys.argv.index("--seconds") + 1])
end, step = time.monotonic() + seconds, 0
while time.monotonic() < end:
    start = now_us()
    sum(i * i for i in range(20000))  # some CPU for the sampler to see
    time.sleep(0.02)
    trace.record_step("TRAIN", step, start, now_us())
    trace.close_if_due()
    step += 1
trace.close()
open(os.path.join(marks, "trained"), "w").write(str(step))
behaviour = os.environ.get("BEHAVIOUR", "ok")
if behaviour == "hang":
    time.sleep(300)
sys.exit(3 if behaviour == "crash" else 0)
'''
OUR_THREADS = ("sdlocal-system-monitor", "sdlocal-uploader")


def profiled_spec(tmp_path: Path, bucket: str, name: str, seconds: float, interval_ms: int = 100) -> JobSpec:
    (tmp_path / "train.py").write_text(TRAIN)
    req = {"TrainingJobName": name, "EntryPoint": "train.py", "HyperParameters": {"seconds": str(seconds)},
           "DebugHookConfig": {"S3OutputPath": f"s3://{bucket}/out"},
           "ProfilerConfig": {"S3OutputPath": f"s3://{bucket}/prof", "ProfilingIntervalInMilliseconds": interval_ms}}
    return spec_from_request(req, base_dir=tmp_path, check_rule_names=False)


class S3Watch:
    """Lists a prefix every 0.1 s from a thread: when each key was first seen, and whether the
    training had finished its steps by then (a key seen before proves a continuous upload)."""

    def __init__(self, client: Any, bucket: str, prefix: str, trained: Path) -> None:
        self.client, self.bucket, self.prefix, self.trained = client, bucket, prefix, trained
        self.first_seen: dict[str, tuple[float, bool]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self.look()

    def look(self) -> None:
        training_done = self.trained.exists()
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.prefix)
        keys = [obj["Key"] for page in pages for obj in page.get("Contents", [])]
        now = time.time()  # one time for one listing: its keys were all there together
        for key in keys:
            self.first_seen.setdefault(key, (now, training_done))

    def __enter__(self) -> S3Watch:
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self._stop.set()
        self._thread.join(10)
        self.look()  # what came last (the end markers)


def run_profiled(tmp_path: Path, moto_server: str, s3_client: Any, bucket: str, behaviour: str,
                 monkeypatch: pytest.MonkeyPatch, stop: threading.Event | None = None,
                 seconds: float = 3.0) -> tuple[Any, list[str], JobDir, S3Watch]:
    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.setenv("MARKS_DIR", str(marks))
    monkeypatch.setenv("BEHAVIOUR", behaviour)
    name = f"prof-{behaviour}"
    spec = profiled_spec(tmp_path, bucket, name, seconds)
    job_dir = JobDir(tmp_path / "jobs" / name)
    lines: list[str] = []
    options = RunOptions(upload_interval_s=0.2, stop_grace_s=2.0)
    with S3Watch(s3_client, bucket, f"prof/{name}/profiler-output/", marks / "trained") as watch:
        result = run_job(spec, job_dir=job_dir, endpoint=S3Endpoint(moto_server, "flag"), runtime=ProcessRuntime(),
                         options=options, echo=lines.append, stop=stop, client=s3_client)
    return result, lines, job_dir, watch


def check_profiler_output(job_dir: JobDir, s3_client: Any, bucket: str, name: str, watch: S3Watch) -> ProfilerReader:
    prefix = f"prof/{name}/profiler-output"
    stored = {o["Key"][len(prefix) + 1:] for page in s3_client.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix=prefix + "/") for o in page.get("Contents", [])}
    local = {p.relative_to(job_dir.profiler).as_posix() for p in job_dir.profiler.rglob("*") if p.is_file()}
    assert not [k for k in local if k.endswith(".tmp")], "a file was left open"
    assert local <= stored  # every closed file uploaded
    assert {"system/training_job_end.ts", "framework/training_job_end.ts"} <= stored
    system = sorted(k for k in stored if k.startswith("system/incremental/"))
    assert len(system) >= 2
    # the end markers came after the final upload: nothing was first seen after them
    markers_seen = min(watch.first_seen[f"{prefix}/{m}"][0] for m in ("system/training_job_end.ts",
                                                                       "framework/training_job_end.ts"))
    late = [key for key, (seen, _) in watch.first_seen.items() if seen > markers_seen and not key.endswith(".ts")]
    assert late == []
    reader = ProfilerReader(f"s3://{bucket}/{prefix}", s3_client=s3_client)
    result = reader.refresh()
    assert result.damage == 0 and result.samples > 0
    assert reader.training_ended()
    assert reader.system.keys(type="cpu", dimension="CPUUtilization")
    assert reader.system.keys(type="memory")
    return reader


def no_thread_left() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name in OUR_THREADS]


def test_profiled_job_samples_uploads_continuously_and_marks_the_end(
        tmp_path: Path, moto_server: str, s3_client: Any, bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    result, lines, job_dir, watch = run_profiled(tmp_path, moto_server, s3_client, bucket, "ok", monkeypatch)
    assert result.training_exit_code == 0, lines
    assert any(line.startswith("System metrics of this host every 100 ms: ") for line in lines), lines
    # the hook is pointed at the job folder's profiler output (SageMaker: /opt/ml/output/profiler)
    config = json.loads((tmp_path / "marks" / "profilerconfig.json").read_text())
    assert config["ProfilingParameters"]["LocalPath"] == str(job_dir.profiler)
    assert config["ProfilingParameters"]["ProfilingIntervalInMilliseconds"] == "100"
    reader = check_profiler_output(job_dir, s3_client, bucket, "prof-ok", watch)
    steps = int((tmp_path / "marks" / "trained").read_text())
    assert len(reader.framework.steps().step) == steps  # the hook's side of the folder is uploaded too
    # uploaded continuously: system files were in S3 while the training still ran its steps
    early = [k for k, (_, done) in watch.first_seen.items() if "/system/incremental/" in k and not done]
    assert len(early) >= 1, sorted(watch.first_seen)
    # samples every 100 ms for ~3 s, in 1-second files
    (core, *_) = reader.system.keys(type="cpu", dimension="CPUUtilization")
    assert len(reader.system.series(core)) >= 15
    assert no_thread_left() == []


@pytest.mark.parametrize("behaviour", ["crash", "hang"])
def test_sampler_stopped_and_output_complete_when_training_crashes_or_is_stopped(
        behaviour: str, tmp_path: Path, moto_server: str, s3_client: Any, bucket: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    stop = threading.Event()
    if behaviour == "hang":  # Ctrl-C once the training finished its steps and hangs
        def interrupt() -> None:
            deadline = time.monotonic() + 60
            while not (tmp_path / "marks" / "trained").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            stop.set()

        threading.Thread(target=interrupt, daemon=True).start()
    result, lines, job_dir, watch = run_profiled(tmp_path, moto_server, s3_client, bucket, behaviour, monkeypatch,
                                                 stop=stop, seconds=2.0)
    if behaviour == "crash":
        assert result.training_exit_code == 3 and result.training_status == "Failed"
    else:
        assert result.stopped and result.training_status == "Stopped" and "Stopping the training job ..." in lines
    check_profiler_output(job_dir, s3_client, bucket, f"prof-{behaviour}", watch)
    assert gone(int((tmp_path / "marks" / "pid").read_text()))
    assert no_thread_left() == []


def test_disabled_profiler_samples_nothing(tmp_path: Path, moto_server: str, s3_client: Any, bucket: str,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.setenv("MARKS_DIR", str(marks))
    (tmp_path / "train.py").write_text(TRAIN)
    req = {"TrainingJobName": "off", "EntryPoint": "train.py", "HyperParameters": {"seconds": "0.5"},
           "ProfilerConfig": {"S3OutputPath": f"s3://{bucket}/prof", "DisableProfiler": True}}
    spec = spec_from_request(req, base_dir=tmp_path, check_rule_names=False)
    lines: list[str] = []
    job_dir = JobDir(tmp_path / "jobs" / "off")
    result = run_job(spec, job_dir=job_dir, endpoint=S3Endpoint(moto_server, "flag"), runtime=ProcessRuntime(),
                     options=RunOptions(upload_interval_s=0.2), echo=lines.append, client=s3_client)
    assert result.training_exit_code == 0
    assert not [line for line in lines if line.startswith("System metrics")]
    assert not (job_dir.profiler / "system").exists()
    assert not s3_client.list_objects_v2(Bucket=bucket, Prefix="prof/off/profiler-output/system/").get("Contents")
    # the hook is told, as on SageMaker
    assert json.loads((marks / "profilerconfig.json").read_text())["DisableProfiler"] is True
