"""Hugging Face Trainer and Lightning jobs on the docker runtime, in an image a user builds as README says
("Hugging Face and Lightning"): sdlocal's training image plus transformers, accelerate and lightning from a
wheelhouse made on the host (examples/hf/wheelhouse.py, examples/hf/Dockerfile). Unchanged scripts
(tests/hook/scripts/hf_trainer.py) run by the real `sdlocal run --runtime docker` with a built-in
rule: the verdicts, and the trial's losses against what the Trainer logged; the script under
`accelerate launch` (2 CPU processes) as the job's container command, each process a worker; and an
unchanged Lightning script (tests/hook/scripts/lightning_train.py) in the same image.

The image is built once per machine: its tag is a digest of the base image's id and the wheels'
requirements (`sdlocal-test-hf:<digest>`), kept between runs; the wheelhouse stays in
build/hf-wheelhouse (downloaded again only when the requirements change). SDLOCAL_TEST_TRAINING_IMAGE
names another base image (e.g. one built from a branch), as in tests/docker/test_distributed.py."""
from __future__ import annotations

import importlib.util
import json
import os
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from sdlocal.trial import create_trial
from sdlocal.trial.modes import ModeKeys
from tests.hook.test_frameworks import SCRIPTS, _need
from tests.launcher.e2e.test_e2e import sdlocal

pytestmark = pytest.mark.docker
REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "hf"
TRAIN, EVAL = ModeKeys.TRAIN, ModeKeys.EVAL


def _wheelhouse_module() -> Any:
    spec = importlib.util.spec_from_file_location("hf_wheelhouse", EXAMPLE / "wheelhouse.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def hf_image(docker_client: Any, sdlocal_images: Any) -> str:
    """sdlocal's training image + transformers, accelerate and lightning (the host's versions), built as
    README says."""
    _need("transformers", "accelerate", "lightning")
    from sdlocal.launcher.images import build as img

    wheelhouse = _wheelhouse_module()
    base = os.environ.get("SDLOCAL_TEST_TRAINING_IMAGE", sdlocal_images.training)
    freeze = docker_client.containers.run(base, entrypoint=["pip"], command=["list", "--format", "freeze"],
                                          remove=True)
    digest = wheelhouse.build(REPO / "build" / "hf-wheelhouse", ["transformers", "accelerate", "lightning"],
                              wheelhouse.frozen_names(freeze.decode()), docker_client.images.get(base).id)
    tag = f"sdlocal-test-hf:{digest}"
    if not img.image_exists(tag, docker_client):
        img.docker_build(docker_client, REPO / "build" / "hf-wheelhouse", str(EXAMPLE / "Dockerfile"), tag,
                         buildargs={"TRAINING_IMAGE": base}, labels={"sdlocal.test": "hf_image"},
                         echo=lambda _line: None)
    return tag


def _spec(tmp_path: Path, name: str, image: str, hyper: dict[str, str], command: list[str] | None = None,
          entry: str = "hf_trainer.py") -> Path:
    spec: dict[str, Any] = {
        "AlgorithmSpecification": {"TrainingImage": image},
        "EntryPoint": entry, "SourceDir": str(SCRIPTS), "HyperParameters": hyper,
        "DebugHookConfig": {"S3OutputPath": "s3://sdlocal/jobs",
                            "HookParameters": {"save_interval": "1", "include_workers": "all"},
                            "CollectionConfigurations": [{"CollectionName": "losses"}]},
        "DebugRuleConfigurations": [{"RuleConfigurationName": "LossNotDecreasing",
                                     "RuleParameters": {"rule_to_invoke": "LossNotDecreasing", "num_steps": "2"}}],
    }
    if command is not None:  # the image's own `accelerate`, the script and its arguments
        spec["AlgorithmSpecification"].update({
            "ContainerEntrypoint": ["accelerate", "launch", "--multi_gpu", "--num_processes", "2", "--num_machines",
                                    "1", "--mixed_precision", "no", "--dynamo_backend", "no"],
            "ContainerArguments": ["hf_trainer.py", *command]})
        del spec["EntryPoint"], spec["HyperParameters"]
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _losses(trial: Any, mode: ModeKeys) -> list[float]:
    loss = trial.tensor("loss_output_0")
    return [float(loss.value(s, mode=mode)) for s in loss.steps(mode=mode)]


def test_hugging_face_trainer_in_a_users_image(hf_image: str, tmp_path: Path, moto_server: str) -> None:
    tag = uuid.uuid4().hex[:6]
    ok, up, accel, pl = f"dk-hf-ok-{tag}", f"dk-hf-up-{tag}", f"dk-hf-accel-{tag}", f"dk-pl-ok-{tag}"
    specs = {ok: _spec(tmp_path, "ok", hf_image, {"max-steps": "8", "eval-steps": "4"}),
             pl: _spec(tmp_path, "pl", hf_image, {"grad-accum": "2"}, entry="lightning_train.py"),
             up: _spec(tmp_path, "up", hf_image, {"case": "diverging", "max-steps": "8"}),
             accel: _spec(tmp_path, "accel", hf_image, {}, ["--max-steps", "6", "--eval-steps", "3"])}
    procs = {job: sdlocal(["run", str(spec), "--runtime", "docker", "--job-name", job], tmp_path, moto_server)
             for job, spec in specs.items()}
    verdicts = {}
    for job, proc in procs.items():
        out, err = proc.communicate(timeout=500)
        assert proc.returncode == 0, err[-3000:]
        assert f"TrainingImage {hf_image}" not in err  # run as given, not mapped to sdlocal's image
        verdicts[job] = {s["RuleConfigurationName"]: s["RuleEvaluationStatus"] for s in json.loads(out)}
    assert verdicts == {ok: {"LossNotDecreasing": "NoIssuesFound"}, up: {"LossNotDecreasing": "IssuesFound"},
                        accel: {"LossNotDecreasing": "NoIssuesFound"}, pl: {"LossNotDecreasing": "NoIssuesFound"}}

    trial = create_trial(tmp_path / "jobs" / ok / "output" / "tensors")
    assert trial.training_ended()
    # 8 optimizer steps; an evaluation (2 batches of 8) after steps 4 and 8
    assert trial.steps(mode=TRAIN) == list(range(8)) and trial.steps(mode=EVAL) == list(range(4))
    log = json.loads((tmp_path / "jobs" / ok / "model" / "log_history.json").read_text())
    np.testing.assert_allclose(_losses(trial, TRAIN), [e["loss"] for e in log if "loss" in e], rtol=1e-3)
    evals = _losses(trial, EVAL)
    np.testing.assert_allclose([np.mean(evals[i:i + 2]) for i in (0, 2)],
                               [e["eval_loss"] for e in log if "eval_loss" in e], rtol=1e-4)
    up_losses = _losses(create_trial(tmp_path / "jobs" / up / "output" / "tensors"), TRAIN)
    assert up_losses[-1] > 10 * up_losses[0]

    # accelerate launch: a worker per process, each its own batches; the Trainer logs their mean
    trial = create_trial(tmp_path / "jobs" / accel / "output" / "tensors")
    assert trial.training_ended() and sorted(trial.workers()) == ["worker_0", "worker_1"]
    assert trial.steps(mode=TRAIN) == list(range(6)) and trial.steps(mode=EVAL) == list(range(2))
    loss = trial.tensor("loss_output_0")
    per_worker = [[float(loss.value(s, mode=TRAIN, worker=w)) for s in range(6)] for w in ("worker_0", "worker_1")]
    log = json.loads((tmp_path / "jobs" / accel / "model" / "log_history.json").read_text())
    np.testing.assert_allclose(np.mean(per_worker, axis=0), [e["loss"] for e in log if "loss" in e], rtol=1e-3)

    # Lightning, through sdlocal's callbacks_factory entry point as the image's sdlocal wheel installs
    # it: 12 optimizer steps of 2 batches; validation (2 batches) after steps 4, 8, 12
    trial = create_trial(tmp_path / "jobs" / pl / "output" / "tensors")
    assert trial.steps(mode=TRAIN) == list(range(12)) and trial.steps(mode=EVAL) == list(range(6))
    train, evals = _losses(trial, TRAIN), _losses(trial, EVAL)
    assert 0.4 < train[0] < 1.2 and 0.4 < evals[0] < 1.2
