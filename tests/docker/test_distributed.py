"""`sdlocal run --runtime docker` of the distributed job of issue 19 (tests/launcher/_distjob.py): one
training container per host (`algo-1`, `algo-2`: their hostnames and aliases on the job's network,
rank 0 at algo-1:7777 as on SageMaker), each within --host-cpus/--host-memory, torchrun in each;
a rank that dies; mpi refused in one line.

The containers run this sdlocal's training image; SDLOCAL_TEST_TRAINING_IMAGE runs them from
another local image instead (as the request's TrainingImage: e.g. one built from a branch whose
hook changed since the image was built)."""
from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.docker.test_training_env import leftovers
from tests.launcher import _distjob as dj
from tests.launcher._smjob import sdlocal

pytestmark = [pytest.mark.docker, pytest.mark.slow]
RANKS = {0: "algo-1", 1: "algo-1", 2: "algo-2", 3: "algo-2"}


def spec(tmp_path: Path, job: str, images: Any, **kwargs: Any) -> Path:
    request = dj.request(job, **kwargs)
    request["AlgorithmSpecification"] = {"TrainingImage": os.environ.get("SDLOCAL_TEST_TRAINING_IMAGE", images.training),
                                         "TrainingInputMode": "File"}
    path = tmp_path / f"{job}.yaml"
    path.write_text(yaml.safe_dump(request))
    return path


def test_one_container_per_host(docker_client: Any, sdlocal_images: Any, moto_server: str, s3_client: Any,
                                tmp_path: Path) -> None:
    from sdlocal.launcher.runtime.docker import remove_run

    job = f"dk-dist-{uuid.uuid4().hex[:6]}"
    try:
        result = sdlocal(["run", str(spec(tmp_path, job, sdlocal_images)), "--host-cpus", "1", "--host-memory", "3g",
                          "--keep-containers"], tmp_path, moto_server, runtime="docker", timeout=900)
        assert result.returncode == 0, result.stderr[-4000:]
        containers = {c.labels.get("sdlocal.host"): c for c in docker_client.containers.list(
            all=True, filters={"label": [f"sdlocal.job={job}", "sdlocal.role=training"]})}
        assert sorted(containers) == ["algo-1", "algo-2"]
        for host, container in containers.items():
            config = container.attrs
            assert config["Config"]["Hostname"] == host
            assert config["HostConfig"]["NanoCpus"] == 1_000_000_000 and config["HostConfig"]["Memory"] == 3 * 1024**3
            networks = config["NetworkSettings"]["Networks"]
            assert any(host in (n.get("Aliases") or []) for n in networks.values()), networks
            assert "torch.distributed.run" in config["Config"]["Cmd"] and "--master_addr" in config["Config"]["Cmd"]
    finally:
        remove_run(docker_client, {"sdlocal.job": job})
    dj.check_statuses(json.loads(result.stdout))
    dj.check_trial(f"s3://sdlocal/jobs/{job}", moto_server, workers=4)
    dj.check_profiler_output(s3_client, "sdlocal", f"jobs/{job}", RANKS)
    dj.check_outputs(s3_client, "sdlocal", f"jobs/{job}/output", RANKS, master_addr="algo-1")
    seen = json.loads(dj.tarball(s3_client, "sdlocal", f"jobs/{job}/output/output.tar.gz")["seen-rank3.json"])
    assert seen["SM_NUM_CPUS"] == "1" and seen["MASTER_PORT"] == "7777"  # --host-cpus; the toolkit's port
    dj.check_logs(tmp_path / "jobs" / job, RANKS)
    assert leftovers(docker_client, job) == []


def test_a_rank_that_dies_fails_the_job_and_leaves_no_container(docker_client: Any, sdlocal_images: Any,
                                                                  moto_server: str, tmp_path: Path) -> None:
    job = f"dk-dist-fail-{uuid.uuid4().hex[:6]}"
    result = sdlocal(["run", str(spec(tmp_path, job, sdlocal_images, **{"fail-rank": "3"}))], tmp_path, moto_server,
                     runtime="docker", timeout=900)
    assert result.returncode == 1, result.stderr[-4000:]
    assert 'ErrorMessage "rank 3 (local_rank: 1) on algo-2 exited with exitcode 3"' in result.stderr, \
        result.stderr[-4000:]
    assert set(s["RuleEvaluationStatus"] for s in json.loads(result.stdout)) <= dj.FINAL
    assert leftovers(docker_client, job) == []


def test_mpi_is_refused_in_one_line(docker_client: Any, sdlocal_images: Any, moto_server: str,
                                    tmp_path: Path) -> None:
    job = f"dk-dist-mpi-{uuid.uuid4().hex[:6]}"
    result = sdlocal(["run", str(spec(tmp_path, job, sdlocal_images, distribution="sagemaker_mpi_enabled"))],
                     tmp_path, moto_server, runtime="docker", timeout=120)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].startswith(
        "Error: distribution mpi: the docker runtime does not run mpirun (SageMaker's MPI launch needs Open MPI")
    assert leftovers(docker_client, job) == [] and not (tmp_path / "jobs" / job).exists()


def test_isolated_hosts_reach_each_other_and_nothing_else(docker_client: Any, sdlocal_images: Any, moto_server: str,
                                                          tmp_path: Path) -> None:
    """EnableNetworkIsolation: the hosts share an internal network of their own (no S3 gateway on
    it); the launcher stages and uploads, as for one isolated host."""
    from sdlocal.launcher.runtime.docker import remove_run

    job = f"dk-dist-iso-{uuid.uuid4().hex[:6]}"
    path = spec(tmp_path, job, sdlocal_images, per_host=1)
    request = yaml.safe_load(path.read_text())
    request["EnableNetworkIsolation"] = True
    path.write_text(yaml.safe_dump(request))
    try:
        result = sdlocal(["run", str(path), "--keep-containers"], tmp_path, moto_server, runtime="docker", timeout=900)
        assert result.returncode == 0, result.stderr[-4000:]
        training = docker_client.containers.list(all=True, filters={"label": [f"sdlocal.job={job}",
                                                                              "sdlocal.role=training"]})
        networks = {name for c in training for name in c.attrs["NetworkSettings"]["Networks"]}
        assert len(training) == 2 and len(networks) == 1, networks
        network = docker_client.networks.get(networks.pop())
        assert network.attrs["Internal"] is True and "hosts" in network.name
        others = docker_client.containers.list(all=True, filters={"label": f"sdlocal.job={job}"})
        assert [c.name for c in others if c not in training and network.name in c.attrs["NetworkSettings"]["Networks"]] \
            == []  # no S3 gateway, no evaluator on it
    finally:
        remove_run(docker_client, {"sdlocal.job": job})
    dj.check_trial(f"s3://sdlocal/jobs/{job}", moto_server, workers=2)
    assert leftovers(docker_client, job) == []


def test_a_stop_stops_every_container(docker_client: Any, sdlocal_images: Any, moto_server: str,
                                      tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    from tests.launcher.e2e.test_e2e import REPO, wait_for_text

    job = f"dk-dist-stop-{uuid.uuid4().hex[:6]}"
    path = spec(tmp_path, job, sdlocal_images, epochs="50", **{"step-seconds": "0.2"})
    env = {**os.environ, "SDLOCAL_HOME": str(tmp_path), "SDLOCAL_RUNTIME": "docker"}
    env.pop("AWS_ENDPOINT_URL_S3", None)
    proc = subprocess.Popen([sys.executable, "-m", "sdlocal", "run", str(path), "--s3-endpoint-url", moto_server],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_text(tmp_path / "jobs" / job / "logs" / "training-algo-2.log", "rank 3 of 4", timeout=300)
        running = docker_client.containers.list(filters={"label": [f"sdlocal.job={job}", "sdlocal.role=training"]})
        assert len(running) == 2
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-3000:]
    assert f"Training job {job}: Stopped" in err
    assert leftovers(docker_client, job) == []
