"""ProcessRuntime: the launch options, environment contract, and stop leaving nothing behind."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from sdlocal.launcher.runtime import ProcessRuntime, RuleLaunch, TrainingLaunch, wait_all
from tests.launcher._procs import gone

CHILD = """
import json, os, signal, subprocess, sys, time
if os.environ.get("IGNORE_TERM"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
with open(os.environ["PIDS_FILE"], "w") as f:
    json.dump({"child": os.getpid(), "grandchild": grandchild.pid, "argv": sys.argv[1:], "cwd": os.getcwd(),
               "env": {k: v for k, v in os.environ.items() if k.startswith(("SDLOCAL_", "SM", "TRAINING", "TENSOR"))}}, f)
print("child started", flush=True)
time.sleep(120)
"""


@pytest.fixture
def fake_python(tmp_path: Path) -> str:
    """An interpreter stand-in: runs CHILD whatever module it is asked for (hook.run, evaluator)."""
    (tmp_path / "child.py").write_text(CHILD)
    script = tmp_path / "fakepython"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} {tmp_path / 'child.py'} \"$@\"\n")
    script.chmod(0o755)
    return str(script)


def wait_for(path: Path, timeout: float = 20.0) -> dict:  # type: ignore[type-arg]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text():
            return json.loads(path.read_text())  # type: ignore[no-any-return]
        time.sleep(0.05)
    raise AssertionError(f"{path} not written")


def training_launch(tmp_path: Path) -> TrainingLaunch:
    cfg = tmp_path / "input" / "config"  # the job folder's layout: tmp_path is the process runtime's /opt/ml
    cfg.mkdir(parents=True, exist_ok=True)
    (cfg / "debughookconfig.json").write_text("{}")
    return TrainingLaunch(
        job_name="j", entry_point="train.py", source_dir=tmp_path, hyperparameters=(("lr", "0.1"), ("steps", "3")),
        config_dir=cfg, model_dir=tmp_path / "model", log_path=tmp_path / "logs" / "training.log",
        env=(("PIDS_FILE", str(tmp_path / "pids.json")),),
    )


@pytest.mark.parametrize("ignore_term", [False, True])
def test_training_stop_leaves_nothing_behind(tmp_path: Path, fake_python: str, ignore_term: bool) -> None:
    runtime = ProcessRuntime(python=fake_python, base_env={**os.environ, "IGNORE_TERM": "1" if ignore_term else ""})
    handle = runtime.start_training(training_launch(tmp_path))
    info = wait_for(tmp_path / "pids.json")
    assert info["argv"] == ["-m", "sdlocal.hook.run", "train.py", "--lr", "0.1", "--steps", "3"]
    assert info["cwd"] == str(tmp_path)
    assert info["env"]["SMDEBUG_CONFIG_FILE_PATH"] == str(tmp_path / "input" / "config" / "debughookconfig.json")
    assert "SMPROFILER_CONFIG_PATH" not in info["env"]  # no profilerconfig.json written
    assert info["env"]["TRAINING_JOB_NAME"] == "j" and info["env"]["SM_MODEL_DIR"] == str(tmp_path / "model")
    assert handle.poll() is None and handle.wait(0.1) is None
    handle.stop(grace=0.5)
    assert handle.poll() is not None
    deadline = time.monotonic() + 10
    while not (gone(info["child"]) and gone(info["grandchild"])) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone(info["child"]) and gone(info["grandchild"])
    assert "child started" in handle.logs()


def test_rule_env_contract(tmp_path: Path, fake_python: str) -> None:
    launch = RuleLaunch(
        job_name="j", rule_name="VG", rule_parameters=(("rule_to_invoke", "VanishingGradient"), ("threshold", "1")),
        debug_output="s3://b/p/j/debug-output", rule_output="s3://b/p/j/rule-output/VG",
        log_path=tmp_path / "logs" / "rule-VG.log", poll_interval_s=0.5,
        env=(("PIDS_FILE", str(tmp_path / "pids.json")), ("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:1")),
    )
    handle = ProcessRuntime(python=fake_python).start_rule(launch)
    try:
        info = wait_for(tmp_path / "pids.json")
    finally:
        handle.stop(grace=1)
    assert info["argv"] == ["-m", "sdlocal.evaluator"]
    env = info["env"]
    assert json.loads(env["SDLOCAL_RULE_PARAMETERS"]) == {"rule_to_invoke": "VanishingGradient", "threshold": "1"}
    assert env["SDLOCAL_DEBUG_OUTPUT"] == "s3://b/p/j/debug-output"
    assert env["SDLOCAL_RULE_OUTPUT"] == "s3://b/p/j/rule-output/VG"
    assert env["SDLOCAL_RULE_CONFIGURATION_NAME"] == "VG" and env["SDLOCAL_JOB_NAME"] == "j"
    assert env["SDLOCAL_POLL_INTERVAL_S"] == "0.5" and "SDLOCAL_DEADLINE_S" not in env


def test_wait_all_and_exit_codes(tmp_path: Path) -> None:
    script = tmp_path / "py"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} -c 'import sys; sys.exit(3)'\n")
    script.chmod(0o755)
    runtime = ProcessRuntime(python=str(script))
    handles = [runtime.start_training(training_launch(tmp_path)) for _ in range(2)]
    assert wait_all(list(handles), timeout=30)
    assert [h.poll() for h in handles] == [3, 3]


# ---- docker runtime: the pure parts (no engine needed) -------------------------------------------------

from sdlocal.launcher.errors import RuntimeLaunchError  # noqa: E402
from sdlocal.launcher.job.registry import StopFileWatcher, request_stop  # noqa: E402
from sdlocal.launcher.runtime.docker_config import (  # noqa: E402
    Endpoint,
    LimitsError,
    RuleLimits,
    container_name,
    map_env,
    rule_image,
    training_image,
    training_mounts,
    write_container_config,
)
from sdlocal.launcher.runtime.relay import ThreadRelay  # noqa: E402
from sdlocal.launcher.runtime.selection import select_runtime  # noqa: E402

RULES_ECR = "503895931360.dkr.ecr.us-east-1.amazonaws.com/sagemaker-debugger-rules:latest"
DLC_ECR = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.0.0-cpu-py310"


def test_rule_limits_parsing() -> None:
    assert RuleLimits.from_flags() == RuleLimits(2 * 1024**3, 1.0)
    assert RuleLimits.from_flags("512m", "0.5") == RuleLimits(512 * 1024**2, 0.5)
    assert RuleLimits.from_flags("2GiB").memory_bytes == 2 * 1024**3
    assert RuleLimits.from_flags("1.5g").memory_bytes == int(1.5 * 1024**3)
    kwargs = RuleLimits.from_flags("1g", "2").to_docker_kwargs()
    assert kwargs["mem_limit"] == kwargs["memswap_limit"] == 1024**3 and kwargs["nano_cpus"] == 2_000_000_000
    for memory, cpus, field in (("lots", None, "--rule-memory"), ("1m", None, "--rule-memory"),
                                (None, "x", "--rule-cpus"), (None, "0", "--rule-cpus")):
        with pytest.raises(LimitsError) as err:
            RuleLimits.from_flags(memory, cpus)
        assert err.value.field == field and str(err.value).startswith(field)


def test_image_mapping() -> None:
    assert rule_image(None, "ev:1") == "ev:1"
    assert rule_image(RULES_ECR, "ev:1") == "ev:1"
    assert rule_image("my-rules:latest", "ev:1") == "my-rules:latest"
    assert training_image(None, "tr:1", lambda _: True) == ("tr:1", None)
    assert training_image("mine:2", "tr:1", lambda i: i == "mine:2") == ("mine:2", None)
    image, note = training_image(DLC_ECR, "tr:1", lambda _: False)
    assert image == "tr:1" and note is not None and "SageMaker ECR image" in note
    image, note = training_image("nowhere:9", "tr:1", lambda _: False)
    assert image == "tr:1" and note is not None and "not a local image" in note


def test_container_paths_rewritten(tmp_path: Path) -> None:
    root = tmp_path / "job"
    config = root / "input" / "config"
    config.mkdir(parents=True)
    (config / "debughookconfig.json").write_text(json.dumps(
        {"LocalPath": str(root / "output" / "tensors"), "S3OutputPath": "s3://b/j/debug-output",
         "HookParameters": {"save_interval": "5"}}))
    (config / "tensorboardoutputconfig.json").write_text(json.dumps({"LocalPath": str(root / "output" / "tensorboard")}))
    source = tmp_path / "src"
    source.mkdir()
    mounts = training_mounts(source, config, root / "model", config.with_name("config.container"))
    write_container_config(config, config.with_name("config.container"), mounts)
    hook = json.loads((config.with_name("config.container") / "debughookconfig.json").read_text())
    assert hook["LocalPath"] == "/opt/ml/output/tensors" and hook["S3OutputPath"] == "s3://b/j/debug-output"
    assert hook["HookParameters"] == {"save_interval": "5"}
    tb = json.loads((config.with_name("config.container") / "tensorboardoutputconfig.json").read_text())
    assert tb["LocalPath"] == "/opt/ml/output/tensorboard"
    # the host copy is untouched (the process runtime's view)
    assert json.loads((config / "debughookconfig.json").read_text())["LocalPath"] == str(root / "output" / "tensors")
    launch = TrainingLaunch(job_name="j", entry_point="train.py", source_dir=source, hyperparameters=(),
                            config_dir=config, model_dir=root / "model", log_path=root / "logs" / "training.log")
    env = map_env(launch.container_env(), mounts)
    assert env["SMDEBUG_CONFIG_FILE_PATH"] == "/opt/ml/input/config/debughookconfig.json"
    assert env["TENSORBOARD_CONFIG_FILE_PATH"] == "/opt/ml/input/config/tensorboardoutputconfig.json"
    assert env["SM_MODEL_DIR"] == "/opt/ml/model" and env["TRAINING_JOB_NAME"] == "j"
    volumes = dict(m.to_volume() for m in mounts)
    assert volumes[str(source)] == {"bind": "/opt/ml/code", "mode": "ro"}
    assert volumes[str(config.with_name("config.container"))] == {"bind": "/opt/ml/input/config", "mode": "ro"}
    assert volumes[str(root / "output")] == {"bind": "/opt/ml/output", "mode": "rw"}
    assert str(config) not in volumes  # the host paths' copy is never mounted
    assert map_env({"X": str(root) + "-other/file"}, mounts) == {"X": str(root) + "-other/file"}


def test_endpoint_and_container_names() -> None:
    assert Endpoint.parse("http://127.0.0.1:5000") == Endpoint("http", "127.0.0.1", 5000)
    assert Endpoint.parse("https://minio.lan").port == 443
    assert Endpoint.parse("http://localhost:9000").via("172.18.0.2") == "http://172.18.0.2:9000"
    with pytest.raises(RuntimeLaunchError, match="AWS_ENDPOINT_URL_S3"):
        Endpoint.parse("localhost:9000")
    assert container_name("sdlocal", "job-1", "rule", "Loss Not/Decreasing!", "ab12") == \
        "sdlocal-job-1-rule-Loss_Not_Decreasing-ab12"


def test_thread_relay_forwards_to_s3(moto_server: str, s3_client, bucket: str) -> None:  # type: ignore[no-untyped-def]
    import boto3

    endpoint = Endpoint.parse(moto_server)
    relay = ThreadRelay("127.0.0.1", endpoint.host, endpoint.port)
    try:
        via = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{relay.port}", region_name="us-east-1")
        via.put_object(Bucket=bucket, Key="k", Body=b"x" * 300_000)
        assert s3_client.get_object(Bucket=bucket, Key="k")["Body"].read() == b"x" * 300_000
        assert via.get_object(Bucket=bucket, Key="k")["Body"].read() == b"x" * 300_000
    finally:
        relay.close()
    with pytest.raises(OSError):
        import socket

        socket.create_connection(("127.0.0.1", relay.port), timeout=2).close()


def test_stop_watcher(tmp_path: Path) -> None:
    import threading

    old = request_stop(tmp_path)
    os.utime(old, (time.time() - 60, time.time() - 60))  # an earlier run's request: ignored
    event = threading.Event()
    watcher = StopFileWatcher(tmp_path, event, interval=0.05).start()
    try:
        assert not event.wait(0.3)
        request_stop(tmp_path)
        assert event.wait(10)
    finally:
        watcher.close()
    assert not (tmp_path / "stop-request").exists()


def test_select_runtime_without_engine() -> None:
    def no_engine() -> None:
        raise ConnectionError("connection refused")

    lines: list[str] = []
    common = {"rule_images": [None], "training_image": None, "echo": lines.append, "docker_client": no_engine}
    assert isinstance(select_runtime("process", **common), ProcessRuntime)  # type: ignore[arg-type]
    assert isinstance(select_runtime("auto", **common), ProcessRuntime)  # type: ignore[arg-type]
    assert lines == ["Runtime: process (no Docker engine answers (connection refused))"]
    with pytest.raises(RuntimeLaunchError, match="--runtime docker: no Docker engine answers"):
        select_runtime("docker", **common)  # type: ignore[arg-type]


def test_s3_gateway_that_cannot_start_is_one_line_and_leaves_no_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """The host relay listens on the docker bridge's gateway address; when that address is not this
    host's (a remote engine), starting the job network is a RuntimeLaunchError naming the S3 gateway."""
    import asyncio
    import threading

    from sdlocal.launcher.runtime.docker import DockerRuntime

    class Network:
        name = "sdlocal-j-net"
        attrs = {"IPAM": {"Config": [{"Subnet": "192.0.2.0/24", "Gateway": "192.0.2.1"}]}}  # TEST-NET-1

    class Networks:
        def create(self, *_args: object, **_kwargs: object) -> Network:
            return Network()

        def get(self, _name: str) -> Network:
            return Network()

    class Client:
        networks = Networks()

    runtime = DockerRuntime(Client(), training_image="tr:1", evaluator_image="ev:1", echo=lambda _: None)
    loops = []
    real_new_loop = asyncio.new_event_loop

    def new_loop() -> asyncio.AbstractEventLoop:
        loops.append(real_new_loop())
        return loops[-1]

    monkeypatch.setattr(asyncio, "new_event_loop", new_loop)
    with pytest.raises(RuntimeLaunchError) as err:
        runtime._ensure_network("j", {"AWS_ENDPOINT_URL_S3": "http://127.0.0.1:5000"})
    assert str(err.value).startswith("cannot start the job network and S3 gateway: ") and "\n" not in str(err.value)
    assert loops and all(loop.is_closed() for loop in loops)
    assert not [t for t in threading.enumerate() if t.name == "sdlocal-s3-relay"]


def test_docker_runtime_close_stops_the_relay_when_the_engine_fails() -> None:
    import threading

    import docker.errors

    from sdlocal.launcher.runtime.docker import DockerRuntime

    class Containers:
        def list(self, **_kwargs: object) -> list[object]:
            raise docker.errors.APIError("engine gone")

    class Client:
        containers = Containers()

    runtime = DockerRuntime(Client(), training_image="tr:1", evaluator_image="ev:1", echo=lambda _: None)
    runtime._relay = ThreadRelay("127.0.0.1", "127.0.0.1", 9)
    with pytest.raises(docker.errors.APIError):
        runtime.close()
    assert runtime._relay is None
    assert not [t for t in threading.enumerate() if t.name == "sdlocal-s3-relay"]


def test_instance_type_limits() -> None:
    from sdlocal.launcher.runtime import RuleLaunch
    from sdlocal.launcher.runtime.docker import DockerRuntime
    from sdlocal.launcher.spec.values import instance_resources

    assert instance_resources("ml.t3.medium") == (2, 4)
    assert instance_resources("ml.m5.xlarge") == (4, 16)
    assert instance_resources("ml.c5.2xlarge") == (8, 16)
    assert instance_resources("ml.r5.large") == (2, 16)
    assert instance_resources("ml.g4dn.12xlarge") == (48, 192)
    for bad in ("m5.xlarge", "ml.m5", "ml.m5.metal", "ml.m5.huge"):
        with pytest.raises(ValueError, match="not an instance type"):
            instance_resources(bad)
    # capped at the host: a 2-CPU, 24 GiB machine runs an ml.m5.4xlarge rule with 2 CPUs and 24 GiB
    assert RuleLimits.for_instance("ml.m5.4xlarge", 2.0, 24 * 1024**3) == RuleLimits(24 * 1024**3, 2.0)
    assert RuleLimits.for_instance("ml.t3.medium", 16.0, 64 * 1024**3) == RuleLimits(4 * 1024**3, 2.0)

    def launch(instance_type: str | None) -> RuleLaunch:
        return RuleLaunch("j", "R", (), "s3://b/j/debug-output", "s3://b/j/rule-output/R", Path("/tmp/r.log"),
                          instance_type=instance_type)

    by_instance = DockerRuntime(None, training_image="tr:1", evaluator_image="ev:1", echo=lambda _: None)
    assert by_instance.rule_limits(launch(None)) == RuleLimits()
    assert by_instance.rule_limits(launch("ml.t3.medium")).memory_bytes == 4 * 1024**3
    flags = RuleLimits.from_flags("1g", "0.5")
    by_flags = DockerRuntime(None, training_image="tr:1", evaluator_image="ev:1", limits=flags, echo=lambda _: None)
    assert by_flags.rule_limits(launch("ml.t3.medium")) == flags  # the flags win


def test_a_running_record_whose_pid_was_reused_is_stale(tmp_path: Path) -> None:
    import json

    from sdlocal.launcher.job.registry import _start_token, find_running, register

    path = register(tmp_path, "j", tmp_path / "job")  # this test process plays the launcher
    record = json.loads(path.read_text())
    assert record["started"] == _start_token(os.getpid()) and record["started"] is not None
    assert find_running(tmp_path, "j") is not None
    # the same pid, alive, but started at another time: another process got the dead launcher's pid
    path.write_text(json.dumps({**record, "started": str(int(record["started"]) + 1)}))
    assert find_running(tmp_path, "j") is None and not path.exists()


def test_training_user_default_root_and_numbers() -> None:
    from sdlocal.launcher.runtime.docker_config import ContainerUser, training_user

    assert training_user(None, host_uid=0, host_gid=0) == ContainerUser(1000, 1000)  # sdlocal as root: uid 1000
    assert training_user(None, host_uid=1234, host_gid=99) == ContainerUser(1234, 99)  # else: you
    assert training_user("root") == ContainerUser(0, 0) and training_user("root").is_root
    assert training_user("2000") == ContainerUser(2000, 2000)
    assert training_user("2000:3000").to_docker() == "2000:3000"
    for bad in ("alice", "1000:staff", "-1", "1000:"):
        with pytest.raises(RuntimeLaunchError, match=r"^--training-user: .* is not root or UID\[:GID\]"):
            training_user(bad)


def _mounts(tmp_path: Path) -> list[Any]:
    from sdlocal.launcher.runtime.docker_config import Mount

    (tmp_path / "output" / "tensors").mkdir(parents=True)
    (tmp_path / "output" / "tensors" / "old.json").write_text("{}")
    (tmp_path / "code").mkdir()
    return [Mount(tmp_path / "output", "/opt/ml/output"), Mount(tmp_path / "code", "/opt/ml/code", read_only=True)]


def test_root_gives_the_writable_mounts_to_the_container_user(tmp_path: Path) -> None:
    from sdlocal.launcher.runtime.docker_config import ContainerUser, own_writable_mounts

    if os.geteuid() != 0:
        pytest.skip("giving folders to another user needs root")
    mounts = _mounts(tmp_path)
    own_writable_mounts(mounts, ContainerUser(1000, 1000), host_is_root=True)
    owners = {(p.stat().st_uid, p.stat().st_gid) for p in [tmp_path / "output", *(tmp_path / "output").rglob("*")]}
    assert owners == {(1000, 1000)}
    assert (tmp_path / "code").stat().st_uid == os.geteuid()  # read-only inputs are never touched


def test_a_user_who_cannot_write_or_read_is_one_line_before_anything_starts(tmp_path: Path) -> None:
    from sdlocal.launcher.runtime.docker_config import ContainerUser, own_writable_mounts, unreadable_input

    mounts = _mounts(tmp_path)
    other = ContainerUser(os.geteuid() + 4242, os.getegid() + 4242)  # neither owner nor group
    (tmp_path / "output").chmod(0o755)
    with pytest.raises(RuntimeLaunchError, match=f"^the training container runs as uid {other.uid} and cannot write"):
        own_writable_mounts(mounts, other, host_is_root=False)
    own_writable_mounts(mounts, ContainerUser(0, 0), host_is_root=False)  # root writes anywhere
    (tmp_path / "code").chmod(0o700)
    (tmp_path / "code" / "train.py").write_text("")
    problem = unreadable_input([tmp_path / "code", tmp_path / "code" / "train.py"], other)
    assert problem == (f"the training container runs as uid {other.uid} and cannot read {tmp_path / 'code'} "
                       f"(owner uid {os.geteuid()}, mode 0700): make it readable (chmod o+rx) or run the training "
                       "as root with --training-user root")
    (tmp_path / "code").chmod(0o755)
    (tmp_path / "code" / "train.py").chmod(0o600)
    assert "cannot read" in (unreadable_input([tmp_path / "code", tmp_path / "code" / "train.py"], other) or "")
    (tmp_path / "code" / "train.py").chmod(0o644)
    assert unreadable_input([tmp_path / "code", tmp_path / "code" / "train.py", tmp_path / "missing"], other) is None
