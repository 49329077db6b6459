"""`sdlocal run --runtime docker`: the example job in containers (verdicts equal to the process
runtime's, one evaluator container per rule, nothing left behind after success, a training crash
or an interrupt), a killed evaluator container ends `Error`, the evaluators' network reaches S3 only."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from sdlocal.launcher.runtime import RuleLaunch
from sdlocal.launcher.runtime.docker import DockerRuntime
from sdlocal.launcher.runtime.docker_config import host_resources
from tests.docker._events import created_containers
from tests.helpers import start_sdlocal

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.docker
STEPS = "20"


def sdlocal(args: list[str], home: Path, moto_server: str, *, runtime: str = "docker") -> subprocess.Popen[str]:
    return start_sdlocal(*args, "--runtime", runtime, "--s3-endpoint-url", moto_server, "--json",
                         "--work-dir", str(home / "jobs" / args[args.index("--job-name") + 1]),
                         home=home, runtime=None)


def finish(proc: subprocess.Popen[str], timeout: float = 240) -> tuple[int, list[dict[str, Any]], str]:
    out, err = proc.communicate(timeout=timeout)
    try:
        rows = json.loads(out) if out.strip() else []
    except ValueError:
        raise AssertionError(f"not JSON: {out!r}\nstderr: {err}") from None
    return proc.returncode, rows, err


def leftovers(client: Any, job: str) -> list[str]:
    label = {"label": f"sdlocal.job={job}"}
    return [c.name for c in client.containers.list(all=True, filters=label)] + \
        [n.name for n in client.networks.list(filters=label)]


def verdicts(rows: list[dict[str, Any]]) -> dict[str, str]:
    return {r["RuleConfigurationName"]: r["RuleEvaluationStatus"] for r in rows}


def test_example_job_same_verdicts_one_container_per_rule(
        docker_client: Any, sdlocal_images: Any, moto_server: str, tmp_path: Path) -> None:
    job, process_job = f"dk-ok-{uuid.uuid4().hex[:6]}", f"pr-ok-{uuid.uuid4().hex[:6]}"
    started = time.monotonic()
    with created_containers(docker_client, job) as created:
        docker_run = sdlocal(["run", "examples/job.yaml", "--job-name", job, "-p", f"steps={STEPS}"], tmp_path,
                             moto_server)
        code, rows, err = finish(docker_run)
    took = time.monotonic() - started
    assert code == 0, err
    assert "Runtime: docker" in err
    process_code, process_rows, process_err = finish(
        sdlocal(["run", "examples/job.yaml", "--job-name", process_job, "-p", f"steps={STEPS}"], tmp_path,
                moto_server, runtime="process"))
    assert process_code == 0, process_err
    assert verdicts(rows) == verdicts(process_rows)
    assert set(verdicts(rows)) == {"VanishingGradient", "ExplodingTensor", "LossNotDecreasing"}
    assert set(verdicts(rows).values()) <= {"IssuesFound", "NoIssuesFound"}, rows

    rules = sorted(a["sdlocal.rule"] for a in created if a.get("sdlocal.role") == "rule")
    assert rules == ["ExplodingTensor", "LossNotDecreasing", "VanishingGradient"]
    assert [a["sdlocal.role"] for a in created].count("training") == 1
    assert leftovers(docker_client, job) == []
    # the job's logs came out of the containers (and `sdlocal logs` shows them)
    logs = subprocess.run([sys.executable, "-m", "sdlocal", "logs", job, "--work-dir", str(tmp_path / "jobs" / job)],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert logs.returncode == 0 and "done: first loss" in logs.stdout, logs.stderr
    print(f"docker run of the example job: {took:.1f} s")


def test_training_crash_leaves_nothing(docker_client: Any, sdlocal_images: Any, moto_server: str,
                                       s3_client: Any, tmp_path: Path) -> None:
    job = f"dk-crash-{uuid.uuid4().hex[:6]}"
    code, rows, err = finish(sdlocal(["run", "examples/job.yaml", "--job-name", job, "-p", "steps=200",
                                      "-p", "fail-at-step=5"], tmp_path, moto_server))
    assert code == 1, err
    assert "Training failed" in err
    assert all(r["RuleEvaluationStatus"] in {"IssuesFound", "NoIssuesFound", "Error"} for r in rows), rows
    assert leftovers(docker_client, job) == []
    assert not_uploaded(s3_client, tmp_path / "jobs" / job, job) == []  # what the crashed training wrote


def test_interrupt_leaves_nothing(docker_client: Any, sdlocal_images: Any, moto_server: str, s3_client: Any,
                                  tmp_path: Path) -> None:
    job = f"dk-int-{uuid.uuid4().hex[:6]}"
    proc = sdlocal(["run", "examples/job.yaml", "--job-name", job, "-p", "steps=1000000", "-p", "log-every=1"],
                   tmp_path, moto_server)
    log = tmp_path / "jobs" / job / "logs" / "training.log"
    deadline = time.monotonic() + 120
    while not (log.exists() and "step 3 " in log.read_text(errors="replace")):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.2)
    assert len(leftovers(docker_client, job)) == 6  # training, 3 rules, the S3 gateway, the network
    proc.send_signal(signal.SIGINT)
    code, rows, err = finish(proc, timeout=120)
    assert code == 130, err
    assert set(verdicts(rows).values()) == {"Stopped"}, rows
    assert leftovers(docker_client, job) == []
    assert not_uploaded(s3_client, tmp_path / "jobs" / job, job) == []  # nothing lost


def status_of(s3_client: Any, job: str, rule: str) -> dict[str, Any]:
    try:
        body = s3_client.get_object(Bucket="sdlocal", Key=f"jobs/{job}/rule-output/{rule}/status.json")["Body"].read()
    except s3_client.exceptions.NoSuchKey:
        return {}
    return dict(json.loads(body))


def not_uploaded(s3_client: Any, job_dir: Path, job: str) -> list[str]:
    """The job's tensor files (written by the training container's user) missing from its debug-output."""
    local = job_dir / "output" / "tensors"
    files = {p.relative_to(local).as_posix() for p in local.rglob("*")
             if p.is_file() and not p.name.endswith(".tmp") and p.name != ".sdlocal-steps.json"}  # (for the launcher)
    pages = s3_client.get_paginator("list_objects_v2").paginate(Bucket="sdlocal", Prefix=f"jobs/{job}/debug-output/")
    stored = {o["Key"].split("/debug-output/", 1)[1] for page in pages for o in page.get("Contents", [])}
    assert files, f"no tensor file in {local}"
    return sorted(files - stored)


def test_killed_evaluator_container_is_error(docker_client: Any, sdlocal_images: Any, moto_server: str,
                                             s3_client: Any, tmp_path: Path) -> None:
    job = f"dk-kill-{uuid.uuid4().hex[:6]}"
    proc = sdlocal(["run", "examples/job.yaml", "--job-name", job, "-p", "steps=300"], tmp_path, moto_server)
    filters = {"label": [f"sdlocal.job={job}", "sdlocal.rule=LossNotDecreasing"], "status": "running"}
    deadline = time.monotonic() + 120
    while not (running := docker_client.containers.list(filters=filters)):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.2)
    running[0].kill()
    killed_at = time.monotonic()
    while status_of(s3_client, job, "LossNotDecreasing").get("RuleEvaluationStatus") != "Error":
        assert time.monotonic() - killed_at < 30
        time.sleep(0.05)
    noticed_after = time.monotonic() - killed_at
    training_ran_on = proc.poll() is None
    code, rows, err = finish(proc)
    print(f"a SIGKILLed evaluator container read Error {noticed_after:.2f} s after the kill")
    assert noticed_after < 5.0 and training_ran_on
    assert code == 0, err
    killed = next(r for r in rows if r["RuleConfigurationName"] == "LossNotDecreasing")
    assert killed["RuleEvaluationStatus"] == "Error"
    assert killed["StatusDetails"].startswith(
        "ClientError: the rule evaluator exited (code 137: killed by signal 9, SIGKILL) without a final status. "
        "Last log lines: ")
    assert " INFO " not in killed["StatusDetails"]
    assert {r["RuleEvaluationStatus"] for r in rows if r is not killed} <= {"IssuesFound", "NoIssuesFound"}
    assert leftovers(docker_client, job) == []


HOG = '''from smdebug.rules.rule import Rule


class Hog(Rule):
    def __init__(self, base_trial):
        super().__init__(base_trial)
        self.kept = []

    def invoke_at_step(self, step):
        self.kept.append(b"x" * (64 * 1024 * 1024))  # 64 MiB more at every step, never given back
        return False
'''


def test_oom_killed_evaluator_container_is_error(docker_client: Any, sdlocal_images: Any, moto_server: str,
                                                 tmp_path: Path) -> None:
    """A custom rule that allocates past --rule-memory: its container is OOM-killed and the rule reads
    Error saying so, while the other rules and the training go on."""
    job = f"dk-oom-{uuid.uuid4().hex[:6]}"
    (tmp_path / "hog.py").write_text(HOG)
    code, rows, err = finish(sdlocal(["run", "examples/job.yaml", "--job-name", job, "-p", "steps=40",
                                      "--custom-rule", f"{tmp_path / 'hog.py'}:Hog", "--rule-memory", "384m"],
                                     tmp_path, moto_server))
    assert code == 0, err
    assert "Training completed" in err
    hog = next(r for r in rows if r["RuleConfigurationName"] == "Hog")
    assert hog["RuleEvaluationStatus"] == "Error"
    assert hog["StatusDetails"].startswith("ClientError: the rule evaluator was OOM-killed (code 137: over its memory "
                                           "limit of 384 MiB) without a final status. Last log lines: ")
    assert "Rule Hog: its evaluator was OOM-killed (code 137: over its memory limit of 384 MiB) without a status: Error" in err
    assert {r["RuleEvaluationStatus"] for r in rows if r is not hog} <= {"IssuesFound", "NoIssuesFound"}, rows
    assert leftovers(docker_client, job) == []


PROBE = r"""
import os, socket, urllib.request
def tcp(host, port):
    try:
        socket.create_connection((host, port), timeout=3).close()
        return "open"
    except OSError:
        return "closed"
print(json.dumps({
    "s3": urllib.request.urlopen(os.environ["AWS_ENDPOINT_URL_S3"] + "/moto-api/", timeout=10).status,
    "host_listener": tcp(os.environ["HOST_IP"], int(os.environ["HOST_PORT"])),
    "host_relay": tcp(os.environ["HOST_IP"], int(os.environ["RELAY_PORT"])),
    "internet": tcp("1.1.1.1", 443),
    "uid": os.getuid(),
}))
""".replace("import os", "import json, os")


def test_evaluator_network_reaches_only_s3(docker_client: Any, sdlocal_images: Any, moto_server: str,
                                           tmp_path: Path) -> None:
    training_image, evaluator_image = sdlocal_images
    runtime = DockerRuntime(docker_client, training_image=training_image, evaluator_image=evaluator_image,
                            echo=lambda _: None)
    job = f"dk-net-{uuid.uuid4().hex[:6]}"
    listener = socket.socket()
    listener.bind(("0.0.0.0", 0))  # a service on every host address: must stay out of reach
    listener.listen()
    accept = threading.Thread(target=lambda: listener.accept(), daemon=True)
    accept.start()
    try:
        runtime._ensure_network(job, {"AWS_ENDPOINT_URL_S3": moto_server})
        assert runtime._relay is not None
        host_ip = runtime._relay.listen_host
        launch = RuleLaunch(
            job_name=job, rule_name="probe", rule_parameters=(), debug_output="s3://b/d", rule_output="s3://b/r",
            log_path=tmp_path / "probe.log",
            env=(("AWS_ENDPOINT_URL_S3", moto_server), ("HOST_IP", host_ip),
                 ("HOST_PORT", str(listener.getsockname()[1])), ("RELAY_PORT", str(runtime._relay.port))),
        )
        handle = runtime.start_rule(launch, entrypoint=["python", "-c", PROBE])
        assert handle.wait(60) == 0, handle.logs()
        attrs = handle.container.attrs["HostConfig"]
        assert attrs["ReadonlyRootfs"] and attrs["CapDrop"] == ["ALL"] and attrs["Memory"] == 2 * 1024**3
        assert "no-new-privileges:true" in attrs["SecurityOpt"] and attrs["NanoCpus"] == 10**9
    finally:
        runtime.close()
        listener.close()
    result = json.loads(handle.logs().strip().splitlines()[-1])
    assert result == {"s3": 200, "host_listener": "closed", "host_relay": "closed", "internet": "closed",
                      "uid": result["uid"]}
    assert result["uid"] != 0
    assert leftovers(docker_client, job) == []


def test_custom_rule_image_under_sdlocal_run(docker_client: Any, sdlocal_images: Any, custom_rule_image: str,
                                             moto_server: str, tmp_path: Path) -> None:
    """A RuleEvaluatorImage that is not SageMaker's runs as a custom rule image, with its baked-in
    rule file, beside a built-in rule in our evaluator image."""
    job = f"dk-custom-{uuid.uuid4().hex[:6]}"
    spec = tmp_path / "job.yaml"
    spec.write_text(json.dumps({
        "EntryPoint": "train.py", "SourceDir": str(REPO / "examples"),
        "HyperParameters": {"steps": "10"},
        "DebugHookConfig": {"HookParameters": {"save_interval": "2"},
                            "CollectionConfigurations": [{"CollectionName": "weights"}]},
        "DebugRuleConfigurations": [
            {"RuleConfigurationName": "WeightNormLow", "RuleEvaluatorImage": custom_rule_image,
             "RuleParameters": {"rule_to_invoke": "WeightNormRule", "source_s3_uri": "/opt/rules/weight_norm_rule.py",
                                "threshold": "0.01"}},
            {"RuleConfigurationName": "WeightNormHigh", "RuleEvaluatorImage": custom_rule_image,
             "RuleParameters": {"rule_to_invoke": "WeightNormRule", "source_s3_uri": "/opt/rules/weight_norm_rule.py",
                                "threshold": "1e6"}},
            {"RuleConfigurationName": "ExplodingTensor", "InstanceType": "ml.t3.medium",
             "RuleParameters": {"rule_to_invoke": "ExplodingTensor", "collection_names": "weights"}},
        ],
    }))
    with created_containers(docker_client, job) as created:
        code, rows, err = finish(sdlocal(["run", str(spec), "--job-name", job, "--keep-containers"], tmp_path,
                                         moto_server))
    assert code == 0, err
    assert verdicts(rows) == {"WeightNormLow": "IssuesFound", "WeightNormHigh": "NoIssuesFound",
                              "ExplodingTensor": "NoIssuesFound"}, rows
    images = {a.get("sdlocal.rule"): a["image"] for a in created}
    assert images["WeightNormLow"] == images["WeightNormHigh"] == custom_rule_image
    assert images["ExplodingTensor"] == sdlocal_images.evaluator
    # limits: the rule's InstanceType (ml.t3.medium: 2 vCPUs, 4 GiB, capped at this host), else the defaults
    kept = docker_client.containers.list(all=True, filters={"label": [f"sdlocal.job={job}", "sdlocal.role=rule"]})
    limits = {c.labels["sdlocal.rule"]: (c.attrs["HostConfig"]["NanoCpus"], c.attrs["HostConfig"]["Memory"]) for c in kept}
    host_cpus, host_memory = host_resources()
    assert limits["ExplodingTensor"] == (int(min(2.0, host_cpus) * 1e9), min(4 * 1024**3, host_memory))
    assert limits["WeightNormLow"] == limits["WeightNormHigh"] == (int(1e9), 2 * 1024**3)
    # --keep-containers kept them; `sdlocal stop` (no launcher alive) removes them
    env = {**os.environ, "SDLOCAL_HOME": str(tmp_path)}
    stopped = subprocess.run([sys.executable, "-m", "sdlocal", "stop", job], cwd=REPO, env=env,
                             capture_output=True, text=True, timeout=120)
    assert stopped.returncode == 0, stopped.stderr
    assert leftovers(docker_client, job) == []


def test_stop_without_a_launcher_removes_the_jobs_leftovers(docker_client: Any, sdlocal_images: Any,
                                                            tmp_path: Path) -> None:
    """A launcher killed with SIGKILL cannot clean up: `sdlocal stop JOB` removes what it left."""
    job = f"dk-orphan-{uuid.uuid4().hex[:6]}"
    labels = {"sdlocal.job": job, "sdlocal.role": "rule", "sdlocal.rule": "Orphan"}
    network = docker_client.networks.create(f"sdlocal-{job}", labels={"sdlocal.job": job}, internal=True)
    docker_client.containers.run(sdlocal_images.evaluator, entrypoint=["sleep", "300"], detach=True,
                                 labels=labels, network=network.name, name=f"sdlocal-{job}-orphan")
    other = docker_client.containers.run(sdlocal_images.evaluator, entrypoint=["sleep", "300"], detach=True,
                                         labels={"sdlocal.job": f"{job}-other"})
    try:
        assert len(leftovers(docker_client, job)) == 2
        env = {**os.environ, "SDLOCAL_HOME": str(tmp_path / "home")}
        stopped = subprocess.run([sys.executable, "-m", "sdlocal", "stop", job], cwd=REPO, env=env,
                                 capture_output=True, text=True, timeout=120)
        assert stopped.returncode == 0, stopped.stderr
        assert f"job {job} had no running launcher; removed" in stopped.stdout
        assert leftovers(docker_client, job) == []
        other.reload()
        assert other.status == "running"  # another job's container is left alone
    finally:
        other.remove(force=True)


TRAINING_PROBE = r"""
import json, os, socket, urllib.request
def tcp(host, port):
    try:
        socket.create_connection((host, port), timeout=3).close()
        return "open"
    except OSError:
        return "closed"
def s3():
    url = os.environ.get("AWS_ENDPOINT_URL_S3")
    if not url:
        return "no endpoint"
    try:
        return urllib.request.urlopen(url + "/moto-api/", timeout=10).status
    except OSError as e:
        return f"unreachable: {e}"
def writes(folder):
    path = os.path.join(folder, "probe.txt")
    with open(path, "w") as f:
        f.write("ok")
    return os.stat(path).st_uid
print(json.dumps({
    "uid": os.getuid(), "gid": os.getgid(), "s3": s3(), "interfaces": sorted(os.listdir("/sys/class/net")),
    "host_listener": tcp(os.environ["HOST_IP"], int(os.environ["HOST_PORT"])),
    "host_relay": tcp(os.environ["HOST_IP"], int(os.environ["RELAY_PORT"])),
    "internet": tcp("1.1.1.1", 443), "dns": tcp("8.8.8.8", 53),
    "aws_env": sorted(k for k in os.environ if k.startswith("AWS_")),
    "output_owner": writes("/opt/ml/output"), "model_owner": writes("/opt/ml/model"),
}))
"""


def test_training_container_user_and_networks_seen_from_inside(docker_client: Any, sdlocal_images: Any,
                                                               moto_server: str, tmp_path: Path) -> None:
    """The training container runs as a non-root user that can write its output folders, sits on the
    job network only (S3 through the gateway; not the host, not the internet); with
    EnableNetworkIsolation it has no network and no S3 settings at all."""
    from sdlocal.launcher.runtime import TrainingLaunch
    from sdlocal.launcher.runtime.docker_config import training_user

    runtime = DockerRuntime(docker_client, training_image=sdlocal_images.training,
                            evaluator_image=sdlocal_images.evaluator, echo=lambda _: None)
    job = f"dk-train-{uuid.uuid4().hex[:6]}"
    code = tmp_path / "code"
    code.mkdir()
    code.chmod(0o755)
    (code / "probe.py").write_text(TRAINING_PROBE)
    listener = socket.socket()
    listener.bind(("0.0.0.0", 0))
    listener.listen()
    threading.Thread(target=lambda: listener.accept(), daemon=True).start()
    results = {}
    try:
        runtime._ensure_network(job, {"AWS_ENDPOINT_URL_S3": moto_server})
        assert runtime._relay is not None
        for isolated in (False, True):
            root = tmp_path / f"job-{isolated}"
            for folder in ("input/config", "output", "model"):
                (root / folder).mkdir(parents=True)
            launch = TrainingLaunch(
                job_name=f"{job}-iso" if isolated else job, entry_point="probe.py", source_dir=code, hyperparameters=(),
                config_dir=root / "input" / "config", model_dir=root / "model", log_path=root / "training.log",
                env=(("AWS_ENDPOINT_URL_S3", moto_server), ("AWS_ACCESS_KEY_ID", "x"), ("AWS_SECRET_ACCESS_KEY", "y")),
                environment=(("HOST_IP", runtime._relay.listen_host), ("HOST_PORT", str(listener.getsockname()[1])),
                             ("RELAY_PORT", str(runtime._relay.port))),
                network_isolation=isolated,
            )
            handle = runtime.start_training(launch)
            assert handle.wait(120) == 0, handle.logs()
            results[isolated] = json.loads(handle.logs().strip().splitlines()[-1])
            assert (root / "output" / "probe.txt").read_text() == "ok"  # the launcher reads what it wrote
    finally:
        runtime.close()
        listener.close()
    user = training_user(None)
    assert user.uid != 0
    for seen in results.values():
        assert (seen["uid"], seen["gid"]) == (user.uid, user.gid)
        assert seen["output_owner"] == seen["model_owner"] == user.uid
        assert seen["host_listener"] == seen["host_relay"] == seen["internet"] == seen["dns"] == "closed", seen
    assert results[False]["s3"] == 200 and results[False]["interfaces"] == ["eth0", "lo"]  # one network: the job's
    assert results[True]["s3"] == "no endpoint" and results[True]["interfaces"] == ["lo"]
    assert results[True]["aws_env"] == []  # no S3 endpoint, no credentials
    assert leftovers(docker_client, job) == leftovers(docker_client, f"{job}-iso") == []
