"""The process runtime's private /opt/ml (launcher/runtime/opt_ml_guard.py, private_opt_ml.py): a
script that writes under /opt/ml itself writes into its job's folder (its TensorBoard writer's
files reach tensorboard-output, its torch.save the model archive), never this host's /opt/ml;
where the machine refuses the namespace, a job whose source names /opt/ml is refused at start in
one line naming the docker runtime, and one that does not runs as before."""
from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from sdlocal.launcher.runtime import opt_ml_guard
from tests.conftest import missing
from tests.hook.test_job_paths import opt_ml_snapshot
from tests.launcher.e2e.test_e2e import REPO

WRITES_OPT_ML = """\
import os
import torch
from torch.utils.tensorboard import SummaryWriter

model = torch.nn.Linear(3, 1)
writer = SummaryWriter("/opt/ml/output/tensorboard")  # as SageMaker's TensorBoard examples do
for step in range(5):
    loss = model(torch.randn(8, 3)).pow(2).mean()
    loss.backward()
    writer.add_scalar("loss", loss.item(), step)
writer.close()
os.makedirs("/opt/ml/model", exist_ok=True)
torch.save(model.state_dict(), "/opt/ml/model/model.pt")
with open("/opt/ml/input/config/hyperparameters.json") as f:  # the job's own config, read through /opt/ml
    print("hyperparameters", f.read(), flush=True)
print("sm model dir", os.environ["SM_MODEL_DIR"], flush=True)
"""

USES_VARIABLES = """\
import argparse, os
parser = argparse.ArgumentParser()
parser.add_argument("--model-dir", default=os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))
args, _ = parser.parse_known_args()
with open(os.path.join(args.model_dir, "done.txt"), "w") as f:
    f.write("ok")
"""


def run_job(tmp_path: Path, moto_server: str, script: str, extra_env: dict[str, str] | None = None) -> tuple[
        str, subprocess.CompletedProcess[str]]:
    source = tmp_path / "src"
    source.mkdir(parents=True, exist_ok=True)
    (source / "train.py").write_text(script)
    job = f"optml-{uuid.uuid4().hex[:6]}"
    request = {"TrainingJobName": job, "EntryPoint": "train.py", "SourceDir": str(source),
               "HyperParameters": {"epochs": "2"},
               "OutputDataConfig": {"S3OutputPath": "s3://sdlocal/jobs"},
               "TensorBoardOutputConfig": {"S3OutputPath": "s3://sdlocal/tb"}}
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump(request))
    env = {**os.environ, "SDLOCAL_HOME": str(tmp_path / "home"), "SDLOCAL_RUNTIME": "process", **(extra_env or {})}
    env.pop("AWS_ENDPOINT_URL_S3", None)
    done = subprocess.run([sys.executable, "-m", "sdlocal", "run", str(spec), "--s3-endpoint-url", moto_server],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    return job, done


def model_members(s3_client: Any, job: str) -> list[str]:
    body = s3_client.get_object(Bucket="sdlocal", Key=f"jobs/{job}/output/model.tar.gz")["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body)) as tar:
        return sorted(m.name.removeprefix("./") for m in tar.getmembers() if m.isfile())


@pytest.mark.slow
def test_a_script_writing_under_opt_ml_writes_into_its_job(tmp_path: Path, moto_server: str, s3_client: Any) -> None:
    problem = opt_ml_guard.namespace_problem(sys.executable)
    if problem is not None:
        missing(f"this machine gives no private /opt/ml: {problem}")  # CI runs as root: it does
    before = opt_ml_snapshot()
    job, done = run_job(tmp_path, moto_server, WRITES_OPT_ML)
    assert opt_ml_snapshot() == before, "the job wrote to this host's /opt/ml"
    assert done.returncode == 0, done.stderr[-3000:]
    log = (tmp_path / "home" / "jobs" / job / "logs" / "training.log").read_text()
    assert "hyperparameters {" in log and '"epochs": "2"' in log  # /opt/ml/input/config is the job's
    assert f"sm model dir {tmp_path / 'home' / 'jobs' / job / 'model'}" in log  # the variables name the same files
    assert model_members(s3_client, job) == ["model.pt"]
    tb = s3_client.list_objects_v2(Bucket="sdlocal", Prefix=f"tb/{job}/tensorboard-output/").get("Contents", [])
    assert any("tfevents" in o["Key"] and o["Size"] > 100 for o in tb), tb


@pytest.mark.slow
def test_without_a_namespace_a_script_naming_opt_ml_is_refused_and_others_run(tmp_path: Path, moto_server: str,
                                                                               s3_client: Any) -> None:
    off = {"SDLOCAL_PRIVATE_OPT_ML": "off"}  # as on a machine that refuses unshare
    before = opt_ml_snapshot()
    _job, done = run_job(tmp_path / "a", moto_server, WRITES_OPT_ML, off)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("Error:")]
    assert line.startswith("Error: train.py:6 names /opt/ml, and the process runtime cannot give this training a "
                           "private /opt/ml here (SDLOCAL_PRIVATE_OPT_ML is off): run the job with --runtime docker"), line
    assert opt_ml_snapshot() == before
    job, done = run_job(tmp_path / "b", moto_server, USES_VARIABLES, off)
    assert done.returncode == 0, done.stderr[-3000:]
    assert model_members(s3_client, job) == ["done.txt"]


def test_direct_opt_ml_use_names_the_first_line_that_writes_there(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(
        "import os\n"
        "# saves to /opt/ml/model on SageMaker\n"
        "model_dir = os.environ.get('SM_MODEL_DIR', '/opt/ml/model')\n"
        "hook = smd.Hook(out_dir='/opt/ml/output/tensors')\n"
        "mlflow_dir = '/opt/mlflow'\n")
    assert opt_ml_guard.direct_opt_ml_use(tmp_path, "train.py") is None
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "save.py").write_text("import torch\n\ndef save(m):\n    torch.save(m, '/opt/ml/model/m.pt')\n")
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "x.py").write_text("open('/opt/ml/x', 'w')\n")  # not the job's source
    assert opt_ml_guard.direct_opt_ml_use(tmp_path, "train.py") == "lib/save.py:4"
    (tmp_path / "train.py").write_text("SummaryWriter('/opt/ml/output/tensorboard')\n")
    assert opt_ml_guard.direct_opt_ml_use(tmp_path, "train.py") == "train.py:1"  # the entry point first


def test_the_helper_mounts_the_folder_on_opt_ml_for_its_command_only(tmp_path: Path) -> None:
    problem = opt_ml_guard.namespace_problem(sys.executable)
    if problem is not None:
        missing(f"this machine gives no private /opt/ml: {problem}")
    folder = tmp_path / "job"
    folder.mkdir()
    before = sorted(os.listdir("/opt")), opt_ml_snapshot()
    argv = opt_ml_guard.wrapped(sys.executable, folder, ["sh", "-c", "echo $$ > /opt/ml/pid; exit 3"])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr  # the command's own exit status (exec'd)
    assert (folder / "pid").read_text().strip().isdigit()
    assert (sorted(os.listdir("/opt")), opt_ml_snapshot()) == before  # nothing made or left on the host
    assert not [p for p in Path(os.environ.get("TMPDIR", "/tmp")).glob("sdlocal-opt-*") if p.is_dir() and
                p.stat().st_mtime >= folder.stat().st_mtime]


def test_the_helper_says_why_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run(opt_ml_guard.wrapped(sys.executable, tmp_path / "nope", ["true"]), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"sdlocal: cannot give the training a private /opt/ml: the job folder {tmp_path / 'nope'} does not exist"]
