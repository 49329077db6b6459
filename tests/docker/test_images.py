"""The container images: names and messages (no Docker), then real containers of the built images:
the evaluator's contract error, non-root + read-only rootfs, a built-in rule on a bind-mounted trial,
the training image's hook writing a trial our reader reads, a script's own torch SummaryWriter in the
training image, and a custom rule image built FROM the evaluator image."""
from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from sdlocal.launcher.cli.images import images as images_group
from sdlocal.launcher.images import build as img
from sdlocal.trial import Collection, TrialWriter, create_trial
from tests.docker.conftest import SdlocalImages

REPO = Path(__file__).resolve().parents[2]
TEST_LABEL = {"sdlocal.test": "tests/docker/test_images.py"}

TRAIN_SCRIPT = """
import sys, torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
loss_fn = torch.nn.MSELoss()
opt = torch.optim.SGD(model.parameters(), lr=float(sys.argv[sys.argv.index("--lr") + 1]))
x, y = torch.randn(16, 4), torch.randn(16, 1)
for _ in range(4):
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
print("trained", float(loss))
"""


# ------------------------------------------------------------------------------------ no Docker needed


def test_image_names_carry_the_installed_version() -> None:
    version = img.sdlocal_version()
    assert img.training_image() == f"sdlocal-training:{version}"
    assert img.evaluator_image() == f"sdlocal-evaluator:{version}"
    assert img.evaluator_image("9.9") == "sdlocal-evaluator:9.9"


def test_missing_image_message_says_what_to_run() -> None:
    message = img.missing_image_message("sdlocal-evaluator:0.1.0")
    assert "sdlocal-evaluator:0.1.0" in message
    assert "`sdlocal images build`" in message and "`sdlocal images build --offline`" in message
    assert "\n" not in message


def test_torch_is_pinned_to_its_cpu_build_and_evaluator_has_no_torch() -> None:
    reqs = img.Requirements.from_host()
    torch_pins = [r for r in reqs.training if r.startswith("torch")]
    assert len(torch_pins) == 1 and torch_pins[0].endswith("+cpu")
    assert not any(r.startswith("torch") for r in reqs.evaluator)
    assert set(reqs.files()) == {"training-requirements.txt", "evaluator-requirements.txt", "nodeps-requirements.txt"}


def test_build_context_is_this_clone_and_a_wrong_one_is_an_error(tmp_path: Path) -> None:
    assert img.find_build_context() == REPO
    with pytest.raises(img.ImageError, match="Dockerfile.training"):
        img.find_build_context(tmp_path)


def test_images_cli_has_help_for_every_command() -> None:
    runner = CliRunner()
    for args in (["--help"], ["build", "--help"], ["list", "--help"]):
        result = runner.invoke(images_group, args)
        assert result.exit_code == 0, result.output
    assert "--offline" in runner.invoke(images_group, ["build", "--help"]).output


def test_dockerignore_keeps_only_the_wheelhouse() -> None:
    lines = [ln.strip() for ln in (REPO / ".dockerignore").read_text().splitlines()]
    rules = [ln for ln in lines if ln and not ln.startswith("#")]
    assert rules[0] == "*" and "!build/wheelhouse" in rules


class _RecordingPip:
    """Stands in for subprocess.run: records pip's argv and creates the files pip would."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, cmd: list[str], **_kwargs: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append(cmd)
        dest = Path(cmd[cmd.index("-w" if "wheel" in cmd else "-d") + 1])
        dest.mkdir(parents=True, exist_ok=True)
        (dest / ("sdlocal-0.1.0-py3-none-any.whl" if "wheel" in cmd else "dep-1.0-py3-none-any.whl")).touch()
        return subprocess.CompletedProcess(cmd, 0, "", "")


def test_wheelhouse_downloads_cp311_binaries_once_and_always_rebuilds_sdlocal(tmp_path: Path) -> None:
    reqs = img.Requirements(training=("torch==2.13.0+cpu", "numpy==2.4.6"), evaluator=("numpy==2.4.6", "boto3==1.0"),
                            no_deps=("tensorboard==2.21.0",))
    pip = _RecordingPip()
    img.build_wheelhouse(tmp_path / "wh", REPO, requirements=reqs, echo=lambda _l: None, run=pip)
    downloads = [c for c in pip.calls if "download" in c]
    assert len(downloads) == 2
    for call in downloads:
        assert "--only-binary=:all:" in call and call[call.index("--python-version") + 1] == "3.11"
    assert {"torch==2.13.0+cpu", "numpy==2.4.6", "boto3==1.0"} <= set(downloads[0])
    assert "--no-deps" in downloads[1] and "tensorboard==2.21.0" in downloads[1]
    assert (tmp_path / "wh" / "training-requirements.txt").read_text() == "torch==2.13.0+cpu\nnumpy==2.4.6\n"

    pip.calls.clear()
    img.build_wheelhouse(tmp_path / "wh", REPO, requirements=reqs, echo=lambda _l: None, run=pip)
    assert [c for c in pip.calls if "download" in c] == []  # unchanged requirements: no download
    assert [c for c in pip.calls if "wheel" in c and "--no-deps" in c]  # our code: always rebuilt
    assert (tmp_path / "wh" / "sdlocal" / "sdlocal-0.1.0-py3-none-any.whl").exists()


def test_a_cuda_wheel_in_the_wheelhouse_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "wh").mkdir()
    (tmp_path / "wh" / "nvidia_cublas_cu12-12.1-py3-none-manylinux1_x86_64.whl").touch()
    with pytest.raises(img.ImageError, match="CUDA"):
        img.build_wheelhouse(tmp_path / "wh", REPO, echo=lambda _l: None, run=_RecordingPip())


def test_an_unknown_image_kind_fails_before_any_build_work() -> None:
    class NoEngine:
        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"the engine was asked for {name} before the image kinds were checked")

    pip = _RecordingPip()
    with pytest.raises(img.ImageError, match="unknown image kind 'trainig'"):
        img.build_images(client=NoEngine(), context=REPO, which=("evaluator", "trainig"), echo=lambda _l: None, run=pip)
    assert pip.calls == []


# ------------------------------------------------------------------------------------ real containers


def _run(client: Any, image: str, *, timeout: float = 180, **kwargs: Any) -> tuple[int, str]:
    """Runs a container to its end (with a deadline) and removes it; returns (exit code, logs)."""
    container = client.containers.run(image, detach=True, labels=TEST_LABEL, **kwargs)
    try:
        result = container.wait(timeout=timeout)
        return int(result["StatusCode"]), container.logs().decode(errors="replace")
    finally:
        container.remove(force=True)


def _trial_with_weights(root: Path, values: tuple[float, ...]) -> Path:
    writer = TrialWriter(root)
    writer.write_collections([Collection("weights", include_regex=(".*weight",))])
    for step, v in enumerate(values):
        writer.write_step(step, "TRAIN", step, [("fc.weight", np.full((4, 4), v, np.float32))])
    writer.write_end_marker()
    return root


def _rule_env(params: dict[str, str]) -> dict[str, str]:
    return {
        "SDLOCAL_JOB_NAME": "images-test",
        "SDLOCAL_RULE_CONFIGURATION_NAME": "R",
        "SDLOCAL_RULE_PARAMETERS": json.dumps(params),
        "SDLOCAL_DEBUG_OUTPUT": "/trial",
        "SDLOCAL_RULE_OUTPUT": "/rule-output",
        "SDLOCAL_POLL_INTERVAL_S": "0.1",
    }


def _writable_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o777)  # the evaluator runs as uid 1000
    return path


@pytest.mark.docker
def test_image_exists_and_require_images(docker_client: Any, sdlocal_images: SdlocalImages) -> None:
    assert img.image_exists(sdlocal_images.evaluator, docker_client)
    assert img.missing_images(sdlocal_images, docker_client) == []
    absent = f"sdlocal-absent:{uuid.uuid4().hex[:8]}"
    assert not img.image_exists(absent, docker_client)
    with pytest.raises(img.ImageError) as err:
        img.require_images([sdlocal_images.training, absent], docker_client)
    assert str(err.value) == img.missing_image_message(absent)


@pytest.mark.docker
def test_evaluator_without_env_exits_with_the_one_line_contract_error(
    docker_client: Any, sdlocal_images: SdlocalImages
) -> None:
    code, logs = _run(docker_client, sdlocal_images.evaluator)
    assert code == 2
    lines = logs.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("evaluator: SDLOCAL_") and "is not set" in lines[0]


@pytest.mark.docker
def test_evaluator_is_non_root_without_torch(docker_client: Any, sdlocal_images: SdlocalImages) -> None:
    probe = ("import importlib.util, os; print(os.getuid(), os.getcwd(), importlib.util.find_spec('torch') is None);"
             "import sdlocal.evaluator.registry, sdlocal.trial.proto, boto3")
    code, logs = _run(docker_client, sdlocal_images.evaluator, entrypoint=["python", "-c", probe])
    assert code == 0, logs
    assert logs.split() == ["1000", "/tmp", "True"]


@pytest.mark.docker
def test_evaluator_runs_a_builtin_rule_on_a_read_only_root(
    docker_client: Any, sdlocal_images: SdlocalImages, tmp_path: Path
) -> None:
    trial = _trial_with_weights(tmp_path / "trial", (0.1, float("nan")))
    out = _writable_dir(tmp_path / "rule-output")
    code, logs = _run(
        docker_client, sdlocal_images.evaluator, read_only=True, tmpfs={"/tmp": "rw,size=64m"},
        environment=_rule_env({"rule_to_invoke": "ExplodingTensor"}),
        volumes={str(trial): {"bind": "/trial", "mode": "ro"}, str(out): {"bind": "/rule-output", "mode": "rw"}},
    )
    status = json.loads((out / "status.json").read_text())
    assert code == 0, logs
    assert status["RuleEvaluationStatus"] == "IssuesFound", status
    assert status["LastEvaluatedStep"] == 1


@pytest.mark.docker
def test_training_image_hook_writes_a_trial_our_reader_reads(
    docker_client: Any, sdlocal_images: SdlocalImages, tmp_path: Path
) -> None:
    code_dir, config_dir, tensors = tmp_path / "code", tmp_path / "config", tmp_path / "tensors"
    code_dir.mkdir()
    config_dir.mkdir()
    (code_dir / "train.py").write_text(TRAIN_SCRIPT)
    (config_dir / "debughookconfig.json").write_text(json.dumps({
        "LocalPath": "/opt/ml/output/tensors",
        "HookParameters": {"save_interval": "1"},
        "CollectionConfigurations": [{"CollectionName": "weights"}, {"CollectionName": "losses"}],
    }))
    probe = "import torch; assert not torch.cuda.is_available() and torch.__version__.endswith('+cpu'); print('cpu')"
    code, logs = _run(docker_client, sdlocal_images.training, command=["python", "-c", probe])
    assert (code, logs.strip()) == (0, "cpu")

    code, logs = _run(
        docker_client, sdlocal_images.training, command=["python", "-m", "sdlocal.hook.run", "train.py", "--lr", "0.01"],
        volumes={
            str(code_dir): {"bind": "/opt/ml/code", "mode": "ro"},
            str(config_dir): {"bind": "/opt/ml/input/config", "mode": "ro"},
            str(tensors): {"bind": "/opt/ml/output/tensors", "mode": "rw"},
        },
    )
    assert code == 0, logs
    assert "trained" in logs
    trial = create_trial(str(tensors))
    assert trial.steps() == [0, 1, 2, 3]
    weights = trial.tensor_names(collection="weights")
    assert weights and trial.tensor(weights[0]).value(3).dtype == np.float32
    assert trial.tensor_names(collection="losses")


SUMMARY_WRITER_SCRIPT = """
import numpy as np
from torch.utils.tensorboard import SummaryWriter
writer = SummaryWriter(log_dir="/opt/ml/output/tensorboard")
for step in range(3):
    writer.add_scalar("train/loss", 1.0 / (step + 1), step)
    writer.add_histogram("weights", np.arange(10.0) * step, step)
writer.add_image("sample", np.linspace(0, 1, 3 * 8 * 8).reshape(3, 8, 8), 2)
writer.close()
print("written")
"""


@pytest.mark.docker
def test_training_image_runs_a_scripts_own_torch_summary_writer(
    docker_client: Any, sdlocal_images: SdlocalImages, tmp_path: Path
) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = _writable_dir(tmp_path / "tensorboard")
    code, logs = _run(docker_client, sdlocal_images.training, command=["python", "-c", SUMMARY_WRITER_SCRIPT],
                      volumes={str(out): {"bind": "/opt/ml/output/tensorboard", "mode": "rw"}})
    assert code == 0, logs
    events = EventAccumulator(str(out), size_guidance={"scalars": 0, "histograms": 0, "images": 0})
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("train/loss")] == [(0, 1.0), (1, 0.5), (2, pytest.approx(1 / 3))]
    assert [(e.step, e.histogram_value.max) for e in events.Histograms("weights")] == [(0, 0.0), (1, 9.0), (2, 18.0)]
    image = events.Images("sample")[0]
    assert (image.step, image.width, image.height) == (2, 8, 8)


@pytest.mark.docker
@pytest.mark.parametrize(("threshold", "expected"), [("10", "IssuesFound"), ("1000", "NoIssuesFound")])
def test_custom_rule_image_loads_its_baked_in_rule(
    docker_client: Any, custom_rule_image: str, tmp_path: Path, threshold: str, expected: str
) -> None:
    trial = _trial_with_weights(tmp_path / "trial", (0.1, 0.2, 100.0))
    out = _writable_dir(tmp_path / "rule-output")
    params = {"rule_to_invoke": "WeightNormRule", "source_s3_uri": "/opt/rules/weight_norm_rule.py",
              "threshold": threshold}
    code, logs = _run(
        docker_client, custom_rule_image, read_only=True, tmpfs={"/tmp": "rw,size=64m"},
        environment=_rule_env(params),
        volumes={str(trial): {"bind": "/trial", "mode": "ro"}, str(out): {"bind": "/rule-output", "mode": "rw"}},
    )
    status = json.loads((out / "status.json").read_text())
    assert code == 0, logs
    assert status["RuleEvaluationStatus"] == expected, status
    assert status["LastEvaluatedStep"] == 2


@pytest.mark.docker
def test_images_list_shows_the_built_images(sdlocal_images: SdlocalImages) -> None:
    result = CliRunner().invoke(images_group, ["list"])
    assert result.exit_code == 0, result.output
    tags = [line.split()[0] for line in result.output.splitlines() if line.strip()]
    assert sdlocal_images.training in tags and sdlocal_images.evaluator in tags


@pytest.mark.docker
def test_base_image_resolution_never_rebuilds_an_existing_base(docker_client: Any, tmp_path: Path) -> None:
    def no_script(cmd: list[str], **_kwargs: Any) -> subprocess.CompletedProcess[str]:
        raise AssertionError(f"unexpected command {cmd}")

    assert img.resolve_base_image(docker_client, "my/base:1", True, REPO, run=no_script) == "my/base:1"
    if img.image_exists(img.OFFLINE_BASE_IMAGE, docker_client):
        assert img.resolve_base_image(docker_client, None, True, REPO, echo=lambda _l: None,
                                      run=no_script) == img.OFFLINE_BASE_IMAGE
