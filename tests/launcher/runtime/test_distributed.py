"""Distributed training jobs, the parts that need no training (issue 19): the SDK's `distribution`
as it reaches CreateTrainingJob, each host's toolkit view, the launch commands, the host group's
failure and stop, sharded channels, the aggregated model, mpirun's command."""
from __future__ import annotations

import io
import json
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from sdlocal.launcher.errors import RuntimeLaunchError, SpecError
from sdlocal.launcher.job.artifacts import publish_folder
from sdlocal.launcher.job.hosts import HostGroup, host_failure, host_launches, torchrun_root_cause
from sdlocal.launcher.job.staging import bucket_storage, stage_channels, stage_host_channels
from sdlocal.launcher.jobdir.folder import JobDir
from sdlocal.launcher.jobdir.training_env import training_environment
from sdlocal.launcher.runtime.base import MpiLayout, RankLayout, Rendezvous
from sdlocal.launcher.runtime.docker_config import HostLimits, LimitsError
from sdlocal.launcher.runtime.mpi import mpirun_argv, nccl_debug, rank_host
from sdlocal.launcher.runtime.process import ProcessHandle, ProcessRuntime, processes_with_token
from sdlocal.launcher.runtime.selection import check_distribution, select_runtime
from sdlocal.launcher.spec.distribution import parse_distribution
from sdlocal.launcher.spec.inputs import Channel
from sdlocal.launcher.spec.model import JobSpec
from sdlocal.launcher.spec.parse import spec_from_request
from sdlocal.trial.storage import S3Storage

# what the real SDK v2 (2.257.7) sends for each `distribution=` (probed with PyTorch(...).hyperparameters())
SDK_TORCH_DISTRIBUTED = {"sagemaker_torch_distributed_enabled": "true", "sagemaker_instance_type": '"ml.g4dn.xlarge"'}
SDK_PYTORCHDDP = {"sagemaker_distributed_dataparallel_enabled": "true", "sagemaker_instance_type": '"ml.m5.xlarge"',
                  "sagemaker_distributed_dataparallel_custom_mpi_options": '""'}
SDK_MPI = {"sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": "2",
           "sagemaker_mpi_custom_mpi_options": '"--NCCL_DEBUG WARN -x FOO"'}


def spec_of(tmp_path: Path, count: int = 2, **hyperparameters: str) -> JobSpec:
    (tmp_path / "train.py").write_text("print('hi')\n")
    return spec_from_request({
        "TrainingJobName": "dist", "EntryPoint": "train.py", "SourceDir": str(tmp_path),
        "HyperParameters": {"epochs": "2", **hyperparameters},
        "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": count, "VolumeSizeInGB": 30},
    }, base_dir=tmp_path)


def test_the_sdks_distributions_are_read_as_the_toolkit_reads_them() -> None:
    assert parse_distribution(SDK_TORCH_DISTRIBUTED).kind == "torch_distributed"
    assert parse_distribution(SDK_PYTORCHDDP).kind == "pytorchddp"  # the SDK sends pytorchddp as SMDDP
    mpi = parse_distribution(SDK_MPI)
    assert (mpi.kind, mpi.processes_per_host, mpi.mpi_options) == ("mpi", 2, "--NCCL_DEBUG WARN -x FOO")
    assert parse_distribution({"sagemaker_torch_distributed_enabled": "false"}).kind == "none"
    per_host = parse_distribution({**SDK_TORCH_DISTRIBUTED, "sagemaker_mpi_num_of_processes_per_host": "3"})
    assert (per_host.processes_per_host, per_host.processes_on(8)) == (3, 3)
    assert parse_distribution(SDK_TORCH_DISTRIBUTED).processes_on(0) == 1  # the toolkit: GPUs, else 1
    assert parse_distribution(SDK_TORCH_DISTRIBUTED).processes_on(4) == 4
    # mpi wins over the others, as in the toolkit's training.py
    assert parse_distribution({**SDK_TORCH_DISTRIBUTED, **SDK_MPI}).kind == "mpi"


@pytest.mark.parametrize(("hyperparameters", "field", "words"), [
    ({"sagemaker_parameter_server_enabled": "true"}, "HyperParameters.sagemaker_parameter_server_enabled",
     "TensorFlow"),
    ({"sagemaker_multi_worker_mirrored_strategy_enabled": "true"},
     "HyperParameters.sagemaker_multi_worker_mirrored_strategy_enabled", "TensorFlow"),
    ({"sagemaker_pytorch_xla_multi_worker_enabled": "true"}, "HyperParameters.sagemaker_pytorch_xla_multi_worker_enabled",
     "Training Compiler"),
    ({"mp_parameters": '{"partitions": 2}'}, "HyperParameters.mp_parameters", "modelparallel"),
    ({"sagemaker_distribution_instance_groups": '["a"]'}, "HyperParameters.sagemaker_distribution_instance_groups",
     "heterogeneous"),
    ({"sagemaker_mpi_num_of_processes_per_host": "0"}, "HyperParameters.sagemaker_mpi_num_of_processes_per_host",
     ">= 1"),
    ({"sagemaker_mpi_num_of_processes_per_host": "two"}, "HyperParameters.sagemaker_mpi_num_of_processes_per_host",
     ">= 1"),
])
def test_a_distribution_sdlocal_cannot_run_is_refused_naming_it(tmp_path: Path, hyperparameters: dict[str, str],
                                                                field: str, words: str) -> None:
    with pytest.raises(SpecError) as err:
        spec_of(tmp_path, **hyperparameters)
    assert err.value.field == field and words in str(err.value) and "\n" not in str(err.value)


def test_instance_count_and_groups(tmp_path: Path) -> None:
    spec = spec_of(tmp_path, 3)
    assert spec.hosts == ("algo-1", "algo-2", "algo-3") and spec.multi_host
    assert spec_of(tmp_path, 1).hosts == ("algo-1",) and not spec_of(tmp_path, 1).multi_host
    with pytest.raises(SpecError, match="ResourceConfig.InstanceCount: 17 hosts on one machine"):
        spec_of(tmp_path, 17)
    with pytest.raises(SpecError, match="ResourceConfig.InstanceGroups: heterogeneous"):
        spec_from_request({"TrainingJobName": "g", "EntryPoint": "train.py", "SourceDir": str(tmp_path),
                              "ResourceConfig": {"InstanceGroups": [{"InstanceGroupName": "a"}]}}, base_dir=tmp_path)


def test_each_host_has_the_toolkits_view_of_the_cluster(tmp_path: Path) -> None:
    spec = spec_of(tmp_path, 2, **SDK_TORCH_DISTRIBUTED)
    one, two = training_environment(spec, "algo-1"), training_environment(spec, "algo-2")
    assert two.resource_config() == {
        "current_host": "algo-2", "current_instance_type": "ml.m5.xlarge", "current_group_name": "homogeneousCluster",
        "hosts": ["algo-1", "algo-2"],
        "instance_groups": [{"instance_group_name": "homogeneousCluster", "instance_type": "ml.m5.xlarge",
                             "hosts": ["algo-1", "algo-2"]}],
        "network_interface_name": "eth0"}
    env1, env2 = (e.to_env("/opt/ml", code_dir="/opt/ml/code", num_gpus=0, num_cpus=4) for e in (one, two))
    assert (env1["SM_CURRENT_HOST"], env2["SM_CURRENT_HOST"], env2["CURRENT_HOST"]) == ("algo-1", "algo-2", "algo-2")
    assert env2["SM_HOSTS"] == '["algo-1","algo-2"]' and env2["SM_NUM_CPUS"] == "4"
    props = json.loads(env2["SM_TRAINING_ENV"])
    # the toolkit's environment.py: a distribution flag puts the group in the distribution
    assert props["distribution_hosts"] == ["algo-1", "algo-2"]
    assert props["distribution_instance_groups"] == ["homogeneousCluster"]
    assert (props["master_hostname"], props["is_master"], json.loads(env1["SM_TRAINING_ENV"])["is_master"]) == \
        ("algo-1", False, True)
    plain = training_environment(spec_of(tmp_path, 2), "algo-2").properties("/opt/ml", code_dir="c", num_gpus=0,
                                                                            num_cpus=1)
    assert plain["distribution_hosts"] == [] and plain["current_instance_group_hosts"] == ["algo-1", "algo-2"]


def test_each_host_has_its_own_opt_ml_and_log(tmp_path: Path) -> None:
    job = JobDir(tmp_path / "job")
    assert job.host_dir("algo-1") == job and job.training_log() == job.logs / "training.log"
    assert job.host_dir("algo-2").root == job.root / "hosts" / "algo-2"
    assert job.training_log("algo-2") == job.logs / "training-algo-2.log"
    spec = spec_of(tmp_path, 2, **SDK_TORCH_DISTRIBUTED, sagemaker_mpi_num_of_processes_per_host="2")
    launches = host_launches(spec, job, (), {})
    assert [launch.host for launch in launches] == ["algo-1", "algo-2"]
    assert launches[1].config_dir == job.root / "hosts" / "algo-2" / "input" / "config"
    assert launches[1].ranks == RankLayout(2, 2, 1)


def test_torchrun_commands_and_the_platforms_variables(tmp_path: Path) -> None:
    spec = spec_of(tmp_path, 2, **SDK_TORCH_DISTRIBUTED)
    launch = host_launches(spec, JobDir(tmp_path / "job"), (), {})[1]
    # docker: SageMaker's command (torchrun = torch.distributed.run), rank 0 at algo-1:7777
    argv = launch.argv("python", Rendezvous("algo-1"), num_gpus=0)
    assert argv == ["python", "-m", "torch.distributed.run", "--nnodes", "2", "--nproc_per_node", "1",
                    "--master_addr", "algo-1", "--master_port", "7777", "--node_rank", "1",
                    "--module", "sdlocal.hook.run", "train.py", "--epochs", "2"]
    env = launch.container_env("/opt/ml", "/opt/ml/code", rendezvous=Rendezvous("algo-1"))
    assert {k: env[k] for k in ("MASTER_ADDR", "MASTER_PORT", "NCCL_SOCKET_IFNAME", "NCCL_IB_DISABLE")} == \
        {"MASTER_ADDR": "algo-1", "MASTER_PORT": "7777", "NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_DISABLE": "1"}
    # the process runtime: the loopback, the same free port for every host of the job
    runtime = ProcessRuntime(num_gpus=0)
    kwargs = launch.to_process_kwargs("python", rendezvous=runtime.rendezvous("dist"))
    assert runtime.rendezvous("dist") == runtime.rendezvous("dist") and runtime.rendezvous("dist").addr == "127.0.0.1"
    assert kwargs["env"]["GLOO_SOCKET_IFNAME"] == "lo" and kwargs["env"]["MASTER_ADDR"] == "127.0.0.1"
    # a GPU host: one process per GPU (the toolkit's default); one host: torchrun without the master options
    assert RankLayout(1, None, 0).torchrun_args(None, num_gpus=4) == ["--nnodes", "1", "--nproc_per_node", "4"]
    # one host without a distribution: exactly as before (no torchrun, no MASTER_ADDR)
    single = host_launches(spec_of(tmp_path, 1), JobDir(tmp_path / "job"), (), {})[0]
    assert single.argv("python") == ["python", "-m", "sdlocal.hook.run", "train.py", "--epochs", "2"]
    assert "MASTER_ADDR" not in single.container_env()


def test_gpus_are_shared_out_among_the_hosts_of_this_machine(tmp_path: Path) -> None:
    launches = host_launches(spec_of(tmp_path, 2, **SDK_TORCH_DISTRIBUTED), JobDir(tmp_path / "job"), (), {})
    assert [ProcessRuntime(num_gpus=4).host_gpus(launch) for launch in launches] == [(2, "0,1"), (2, "2,3")]
    assert ProcessRuntime(num_gpus=1).host_gpus(launches[1]) == (1, None)  # fewer GPUs than hosts: all see it
    assert ProcessRuntime(num_gpus=0).host_gpus(launches[1]) == (0, None)


class FakeHandle(ProcessHandle):
    """A host's training: exits with `code` after `after` seconds, or when stopped (143)."""

    def __init__(self, name: str, log: Path, code: int, after: float, lines: str = "") -> None:
        log.write_text(lines)
        self.name, self.log_path, self.labels, self.token = name, log, {}, None
        self.code, self.at = code, time.monotonic() + after
        self.stopped: float | None = None
        self.done = threading.Event()

    def poll(self) -> int | None:
        if self.stopped is not None:
            return 143
        return self.code if time.monotonic() >= self.at else None

    def wait(self, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while self.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.poll()

    def stop(self, grace: float) -> int | None:
        if self.poll() is None:
            self.stopped = time.monotonic()
        return self.poll()


ROOT_CAUSE = """torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
sdlocal.hook.run FAILED
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-26_07:35:{second}
  host      : localhost
  rank      : {rank} (local_rank: {local})
  exitcode  : {code} (pid: 31238)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""


def test_the_first_host_to_fail_fails_the_group_and_the_others_are_stopped(tmp_path: Path) -> None:
    # algo-2's rank 3 dies; algo-1's ranks lose their peer a moment later (seen first here)
    peer_lost = "[rank0]: RuntimeError: [pair.cc:553] Connection closed by peer [127.0.0.1]:1\n" + \
        ROOT_CAUSE.format(second=35, rank=0, local=0, code=1)
    one = FakeHandle("algo-1", tmp_path / "1.log", 1, 0.0, peer_lost)
    two = FakeHandle("algo-2", tmp_path / "2.log", 3, 0.0, "rank 3: failing\n" + ROOT_CAUSE.format(
        second=34, rank=3, local=1, code=3))
    three = FakeHandle("algo-3", tmp_path / "3.log", 0, 30.0)
    group = HostGroup([one, two, three], ["algo-1", "algo-2", "algo-3"], grace=1.0)
    assert group.wait(10.0) is not None
    assert three.stopped is not None  # stopped at once, not left to run its 30 s
    assert group.failed_host == "algo-2" and group.poll() == 3
    assert "rank      : 3" in group.logs()
    assert torchrun_root_cause(group.last_log_lines(50)) == {
        "time": "2026-11-26_07:35:34", "host": "localhost", "rank": "3 (local_rank: 1)", "exitcode": "3 (pid: 31238)"}


def test_the_failing_ranks_host_stopped_while_winding_down_reports_a_failed_hosts_exit(tmp_path: Path) -> None:
    """algo-2's rank died; its torchrun still winds down its other worker when algo-1's (peer lost)
    exits 1 first and the group stops algo-2: the root cause is algo-2's, the exit code is a failed
    host's own (1, torchrun's), not the SIGTERM the group sent (143): seen in CI as ExitCode -15."""
    peer_lost = "[rank0]: RuntimeError: Connection closed by peer\n" + ROOT_CAUSE.format(second=35, rank=0, local=0,
                                                                                        code=1)
    one = FakeHandle("algo-1", tmp_path / "1.log", 1, 0.0, peer_lost)
    two = FakeHandle("algo-2", tmp_path / "2.log", 1, 30.0, "rank 3: failing\n" + ROOT_CAUSE.format(
        second=34, rank=3, local=1, code=3))
    group = HostGroup([one, two], ["algo-1", "algo-2"], grace=1.0)
    assert group.wait(10.0) == 1
    assert two.stopped is not None and group.failed_host == "algo-2"


def test_a_group_that_completes_and_one_that_is_stopped(tmp_path: Path) -> None:
    hosts = [FakeHandle(f"algo-{i}", tmp_path / f"{i}.log", 0, 0.1 * i) for i in (1, 2)]
    group = HostGroup(hosts, ["algo-1", "algo-2"], grace=1.0)
    assert group.poll() is None and group.wait(5.0) == 0 and group.failed_host is None
    running = [FakeHandle(f"algo-{i}", tmp_path / f"r{i}.log", 0, 60.0) for i in (1, 2)]
    stopped = HostGroup(running, ["algo-1", "algo-2"], grace=1.0)
    assert stopped.stop(1.0) == 143 and all(h.stopped is not None for h in running)


def test_the_failure_reason_names_the_rank_and_its_host(tmp_path: Path) -> None:
    spec = spec_of(tmp_path, 2, **SDK_TORCH_DISTRIBUTED, sagemaker_mpi_num_of_processes_per_host="2")
    own_error = ("[rank3]: Traceback (most recent call last):\n[rank3]:   File \"train.py\", line 3\n"
                 "[rank3]: ValueError: bad batch\n[rank2]: RuntimeError: Connection closed by peer\n")
    handle = FakeHandle("algo-2", tmp_path / "2.log", 1, 0.0, own_error + ROOT_CAUSE.format(
        second=34, rank=3, local=1, code=1))
    group = HostGroup([FakeHandle("algo-1", tmp_path / "1.log", 0, 0.0), handle], ["algo-1", "algo-2"], grace=1.0)
    group.wait(5.0)
    failure = host_failure(spec, group)
    assert failure.host == "algo-2"
    assert failure.message == "ValueError: bad batch (rank 3 (local_rank: 1) on algo-2 exited with exitcode 1)"
    assert failure.command == ["torchrun", "--nnodes", "2", "--nproc_per_node", "2", "--node_rank", "1",
                               "train.py", "--epochs", "2"]


def test_sharded_channels_give_each_host_its_share(tmp_path: Path, s3_client: Any, bucket: str) -> None:
    for i in range(5):
        s3_client.put_object(Bucket=bucket, Key=f"data/part-{i}.csv", Body=f"{i}\n".encode())
    sharded = Channel("train", f"s3://{bucket}/data/", distribution="ShardedByS3Key")
    full = Channel("test", f"s3://{bucket}/data/")
    s3 = bucket_storage(s3_client)
    first_data = tmp_path / "algo-1" / "input" / "data"
    first = stage_channels(s3, (sharded, full), first_data, echo=lambda _: None, shard=(0, 2))
    second_data = tmp_path / "algo-2" / "input" / "data"
    second = stage_host_channels(s3, (sharded, full), first, first_data, second_data, 1, 2, echo=lambda _: None)
    names = {p: sorted(f.name for f in (p / "train").iterdir()) for p in (first_data, second_data)}
    assert names == {first_data: ["part-0.csv", "part-2.csv", "part-4.csv"], second_data: ["part-1.csv", "part-3.csv"]}
    assert sorted(f.name for f in (second_data / "test").iterdir()) == [f"part-{i}.csv" for i in range(5)]
    assert (second_data / "test").is_symlink()  # the same data: linked, not downloaded again
    assert {d.rel for d in second} == {"input/data/train", "input/data/test"}


def test_every_hosts_model_is_aggregated(tmp_path: Path, s3_client: Any, bucket: str) -> None:
    one, two = tmp_path / "m1", tmp_path / "m2"
    for folder, files in ((one, {"model.pth": b"a", "shared.txt": b"1"}), (two, {"extra.pth": b"b", "shared.txt": b"2"})):
        folder.mkdir()
        for name, data in files.items():
            (folder / name).write_bytes(data)
    clashes = publish_folder([one, two], S3Storage(bucket, "out", client=s3_client), "model.tar.gz", tmp_path)
    assert clashes == ["shared.txt"]
    body = s3_client.get_object(Bucket=bucket, Key="out/model.tar.gz")["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
        got = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]
    assert got == {"model.pth": b"a", "shared.txt": b"1", "extra.pth": b"b"}


def test_mpirun_command_as_the_toolkits_master_runner() -> None:
    argv = mpirun_argv("/usr/bin/mpirun", ["algo-1", "algo-2"], 2, MpiLayout(2, None, "--NCCL_DEBUG WARN -x FOO"),
                       "python -m sdlocal.launcher.runtime.mpi_agent", ["python", "-m", "sdlocal.hook.run", "t.py"])
    assert argv[:5] == ["/usr/bin/mpirun", "--host", "algo-1:2,algo-2:2", "-np", "4"]
    assert "orte_abort_on_non_zero_status" in argv and "NCCL_DEBUG=WARN" in argv
    assert argv[argv.index("plm_rsh_agent") + 1] == "python -m sdlocal.launcher.runtime.mpi_agent"
    assert argv[-6:] == ["-x", "FOO", "python", "-m", "sdlocal.hook.run", "t.py"]
    assert mpirun_argv("m", ["algo-1", "algo-2"], 1, MpiLayout(None, 3), "a", ["p"])[2:5] == ["algo-1,algo-2", "-np", "3"]
    assert nccl_debug("") == ("INFO", []) and nccl_debug("--NCCL_DEBUG=TRACE -v") == ("TRACE", ["-v"])
    assert [rank_host(r, ["algo-1", "algo-2"], 2) for r in range(4)] == ["algo-1", "algo-1", "algo-2", "algo-2"]


def test_what_a_runtime_cannot_launch_is_one_line_before_anything_starts(monkeypatch: pytest.MonkeyPatch,
                                                                          tmp_path: Path) -> None:
    with pytest.raises(RuntimeLaunchError, match="the docker runtime does not run mpirun"):
        check_distribution("mpi", "docker")
    monkeypatch.setenv("PATH", str(tmp_path))  # no mpirun
    with pytest.raises(RuntimeLaunchError, match=r"no `mpirun` on this machine's PATH; install Open MPI"):
        check_distribution("mpi", "process")
    check_distribution("torch_distributed", "docker")  # fine everywhere
    with pytest.raises(RuntimeLaunchError, match="--host-cpus/--host-memory: the process runtime cannot limit"):
        select_runtime("process", rule_images=[], training_image=None, host_limits=HostLimits(cpus=1.0))
    assert HostLimits.from_flags(None, None) is None
    assert HostLimits.from_flags("2g", "1.5").to_docker_kwargs() == {
        "mem_limit": 2 * 1024**3, "memswap_limit": 2 * 1024**3, "nano_cpus": 1_500_000_000}
    with pytest.raises(LimitsError, match="--host-memory: 'lots' is not a memory size"):
        HostLimits.from_flags("lots", None)


def test_stopping_a_launch_ends_the_processes_it_started_in_sessions_of_their_own(tmp_path: Path) -> None:
    import sys

    from sdlocal.launcher.runtime.process import TOKEN_ENV, start_process

    # a child in a session of its own (as torchrun starts its processes): out of the group's reach
    script = ("import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], "
              "start_new_session=True); time.sleep(60)")
    token = "test-token-" + tmp_path.name
    handle = start_process("t", tmp_path / "t.log", [sys.executable, "-c", script], cwd=str(tmp_path),
                           env={"PATH": "/usr/bin:/bin", TOKEN_ENV: token})
    handle.token = token
    deadline = time.monotonic() + 20
    while len(processes_with_token(token)) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(processes_with_token(token)) == 2
    handle.stop(1.0)
    deadline = time.monotonic() + 10
    while processes_with_token(token) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_with_token(token) == []


def test_host_limit_flags_are_checked_at_the_command(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from sdlocal.launcher.cli import cli as main

    (tmp_path / "train.py").write_text("print('hi')\n")
    runner = CliRunner()
    served = runner.invoke(main, ["serve", "--background", "--port", "0", "--host-cpus", "lots"],
                           env={"SDLOCAL_HOME": str(tmp_path / "home")})
    assert served.exit_code == 1 and "--host-cpus: 'lots' is not a number of CPUs" in served.output
    assert not (tmp_path / "home" / "serve.log").exists()  # nothing started
    ran = runner.invoke(main, ["run", "--entry-point", "train.py", "--source-dir", str(tmp_path), "--runtime", "process",
                               "--host-memory", "2g"], env={"SDLOCAL_HOME": str(tmp_path / "home")})
    assert ran.exit_code == 1 and "the process runtime cannot limit a host's CPUs or memory" in ran.output
    assert "--host-cpus" in runner.invoke(main, ["serve", "--help"]).output


def test_serve_refuses_at_create_training_job_what_its_runtime_cannot_launch(tmp_path: Path) -> None:
    """serve on the docker runtime: mpi is a ValidationException at CreateTrainingJob (the SDK's
    fit() raises it), nothing is created; so is a distribution sdlocal does not run at all."""
    from botocore.exceptions import ClientError

    from sdlocal.launcher.serve.app import ServeServer
    from tests.serve.test_api import client, request

    server = ServeServer(tmp_path / "home", port=0, runtime="docker", echo=lambda _line: None)
    server.start()
    try:
        sm = client(server)
        for name, hyperparameters, words in (
                ("mpi-on-docker", {"sagemaker_mpi_enabled": "true"}, "distribution mpi: the docker runtime does not run"),
                ("tf-ps", {"sagemaker_parameter_server_enabled": "true"},
                 "HyperParameters.sagemaker_parameter_server_enabled: the parameter_server distribution")):
            body = request(name, ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 2, "VolumeSizeInGB": 30})
            body["HyperParameters"].update(hyperparameters)
            with pytest.raises(ClientError) as info:
                sm.create_training_job(**body)
            assert info.value.response["Error"]["Code"] == "ValidationException"
            assert info.value.response["Error"]["Message"].startswith(words)
        assert sm.list_training_jobs()["TrainingJobSummaries"] == []
    finally:
        assert server.stop(timeout=60) == []
