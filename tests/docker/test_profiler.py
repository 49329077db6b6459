"""Profiling under the docker runtime: the system sampler samples the training CONTAINER (its pid,
its cgroup), the hook's LocalPath is /opt/ml/output/profiler inside it (the job folder's
output/profiler on the host, uploaded like the tensors), and each profiler rule gets its own
evaluator container with the evaluator's environment contract, checked by a stand-in run in the
evaluator image instead of `python -m sdlocal.evaluator` (the real profiler evaluators:
test_profiler_e2e.py)."""
from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from sdlocal.launcher.job.run import RunOptions, run_job
from sdlocal.launcher.jobdir.folder import JobDir
from sdlocal.launcher.runtime.docker import DockerRuntime
from sdlocal.launcher.s3.endpoint import S3Endpoint
from sdlocal.launcher.sampler.sampler import make_sampler
from sdlocal.launcher.spec.parse import spec_from_request
from sdlocal.trial.profiler import ProfilerReader
from tests.docker.test_runtime import leftovers

pytestmark = pytest.mark.docker

TRAIN = r'''
import json, os, time
from sdlocal.trial.profiler import TraceWriter, now_us
path = os.environ["SMPROFILER_CONFIG_PATH"]
config = json.load(open(path))
print("profiler config", path, json.dumps(config), flush=True)
trace = TraceWriter(config["ProfilingParameters"]["LocalPath"], "0-algo-1", close_interval_s=0.5)
end, step = time.monotonic() + 3, 0
while time.monotonic() < end:
    start = now_us()
    sum(i * i for i in range(50000))
    trace.record_step("TRAIN", step, start, now_us())
    trace.close_if_due()
    step += 1
trace.close()
print("steps", step, flush=True)
'''

STAND_IN = r'''
import json, os, sys, boto3
params = json.loads(os.environ["SDLOCAL_RULE_PARAMETERS"])
print("stand-in profiler evaluator", os.environ["SDLOCAL_RULE_CONFIGURATION_NAME"], flush=True)
if params.get("behaviour") == "crash":
    sys.exit(1)
contract = {k: os.environ[k] for k in ("SDLOCAL_PROFILER_OUTPUT", "SDLOCAL_DEBUG_OUTPUT", "SDLOCAL_RULE_OUTPUT")}
bucket, _, prefix = os.environ["SDLOCAL_RULE_OUTPUT"][5:].partition("/")
boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL_S3"]).put_object(
    Bucket=bucket, Key=prefix + "/status.json", Body=json.dumps({
        "RuleConfigurationName": os.environ["SDLOCAL_RULE_CONFIGURATION_NAME"],
        "RuleEvaluationStatus": "NoIssuesFound", "StatusDetails": json.dumps(contract)}))
'''


class StandInProfilerEvaluators(DockerRuntime):
    """Profiler rules' evaluator containers run the stand-in (same image, user, limits, network)."""

    def start_rule(self, launch: Any, **override: Any) -> Any:
        if launch.rule_name.startswith("Profiler"):
            override = {**override, "entrypoint": ["python", "-c", STAND_IN]}
        return super().start_rule(launch, **override)


def test_container_is_sampled_and_profiler_rules_get_their_containers(
        docker_client: Any, sdlocal_images: Any, moto_server: str, s3_client: Any, bucket: str,
        tmp_path: Path) -> None:
    job = f"dk-prof-{uuid.uuid4().hex[:6]}"
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(TRAIN)
    spec = spec_from_request({
        "TrainingJobName": job, "EntryPoint": "train.py", "SourceDir": str(tmp_path / "src"),
        "ProfilerConfig": {"S3OutputPath": f"s3://{bucket}/prof", "ProfilingIntervalInMilliseconds": 100},
        "ProfilerRuleConfigurations": [
            {"RuleConfigurationName": "ProfilerReport"},
            {"RuleConfigurationName": "ProfilerCrash", "RuleParameters": {"rule_to_invoke": "ProfilerReport",
                                                                         "behaviour": "crash"}}],
    }, base_dir=tmp_path, check_rule_names=False, default_output_path=f"s3://{bucket}/out")
    sampled: dict[str, Any] = {}

    def recording_sampler(*args: Any, **kwargs: Any) -> Any:
        sampled.update(kwargs)
        return make_sampler(*args, **kwargs)

    def container_pid_now() -> None:  # the training container's State.Pid, seen by the engine
        for c in docker_client.containers.list(filters={"label": [f"sdlocal.job={job}", "sdlocal.role=training"]}):
            c.reload()
            sampled.setdefault("engine_pid", c.attrs["State"]["Pid"])

    lines: list[str] = []

    def echo(line: str) -> None:
        lines.append(line)
        if line.startswith("Training job") and "started" in line:
            threading.Thread(target=container_pid_now, daemon=True).start()

    training_image, evaluator_image = sdlocal_images
    runtime = StandInProfilerEvaluators(docker_client, training_image=training_image,
                                        evaluator_image=evaluator_image, echo=lines.append)
    job_dir = JobDir(tmp_path / "jobs" / job)
    try:
        result = run_job(spec, job_dir=job_dir, endpoint=S3Endpoint(moto_server, "flag"), runtime=runtime,
                         options=RunOptions(upload_interval_s=0.5, stop_grace_s=5.0), echo=echo, client=s3_client,
                         runs_profiler_rule=lambda rule: True, sampler_factory=recording_sampler)
    finally:
        runtime.close()
    assert result.training_exit_code == 0, (job_dir.logs / "training.log").read_text()
    assert any(line.startswith("System metrics of the training container every 100 ms") for line in lines), lines
    assert sampled["container_pid"] == sampled["engine_pid"] and sampled["gpu_indices"] == ()
    log = (job_dir.logs / "training.log").read_text()
    assert "profiler config /opt/ml/input/config/profilerconfig.json" in log
    assert '"LocalPath": "/opt/ml/output/profiler"' in log  # SageMaker's place, inside the container
    steps = int(log.split("steps ", 1)[1].split()[0])

    prefix = f"s3://{bucket}/prof/{job}/profiler-output"
    reader = ProfilerReader(prefix, s3_client=s3_client)
    refreshed = reader.refresh()
    assert refreshed.damage == 0 and reader.training_ended()
    assert reader.system.keys(type="cpu", dimension="CPUUtilization") and reader.system.keys(type="memory")
    assert reader.system.keys(type="gpu") == []
    assert len(reader.framework.steps().step) == steps  # written in the container, uploaded from the host

    rows = {s["RuleConfigurationName"]: s for s in result.statuses}
    assert list(rows) == ["ProfilerReport", "ProfilerCrash"]
    assert rows["ProfilerReport"]["RuleEvaluationStatus"] == "NoIssuesFound"
    assert json.loads(rows["ProfilerReport"]["StatusDetails"]) == {
        "SDLOCAL_PROFILER_OUTPUT": prefix, "SDLOCAL_DEBUG_OUTPUT": f"s3://{bucket}/out/{job}/debug-output",
        "SDLOCAL_RULE_OUTPUT": f"s3://{bucket}/prof/{job}/rule-output/ProfilerReport"}
    assert rows["ProfilerCrash"]["RuleEvaluationStatus"] == "Error"
    assert "exited (code 1) without a final status" in rows["ProfilerCrash"]["StatusDetails"]
    assert "stand-in profiler evaluator ProfilerCrash" in rows["ProfilerCrash"]["StatusDetails"]
    assert leftovers(docker_client, job) == []
