"""End to end: an unchanged Hugging Face Trainer script started by `accelerate launch` (2 processes
on this machine's CPU, torch.distributed over gloo) as a job's container command under the real
`sdlocal run` (process runtime), the zero-code hook attached in each worker by the job's
sitecustomize (hook/zero_code). Each worker's trial data is checked against what the Trainer
logged (its losses are the mean over the workers, its gradients are all-reduced), and the trial is
opened by the real smdebug 1.0.34's reader. Beside it, the same script under SageMaker's
`torch_distributed` distribution (torchrun, `sdlocal.hook.run` in each process) with smdebug's
default `include_workers` (one): only rank 0 writes.

`accelerate launch --cpu --num_processes 2` runs ONE process (accelerate's simple launcher: `--cpu`
skips its multi-process launcher); several CPU processes are `--multi_gpu --num_processes 2` with a
script that asks for the CPU (`TrainingArguments(use_cpu=True)`), which is what runs here."""
from __future__ import annotations

import json
import subprocess
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

pytestmark = pytest.mark.slow
TRAIN, EVAL = ModeKeys.TRAIN, ModeKeys.EVAL
WORKERS = ["worker_0", "worker_1"]
CLIP = 0.5

READ_WITH_SMDEBUG = """
import json, sys
from smdebug.trials import create_trial
from smdebug.core.modes import ModeKeys
t = create_trial(sys.argv[1])
loss = t.tensor("loss_output_0")
out = {"workers": sorted(t.workers()), "train": t.steps(mode=ModeKeys.TRAIN), "eval": t.steps(mode=ModeKeys.EVAL),
       "losses": {w: [float(loss.value(s, mode=ModeKeys.TRAIN, worker=w)) for s in loss.steps(mode=ModeKeys.TRAIN)]
                  for w in sorted(t.workers())},
       "gradients": len(t.tensor_names(collection="gradients"))}
print(json.dumps(out))
"""


RULES = [{"RuleConfigurationName": "LossNotDecreasing",
          "RuleParameters": {"rule_to_invoke": "LossNotDecreasing", "num_steps": "2"}}]


def _torchrun_spec(tmp_path: Path) -> Path:
    spec = {
        "EntryPoint": "hf_trainer.py", "SourceDir": str(SCRIPTS),
        "HyperParameters": {"max-steps": "6", "eval-steps": "3", "sagemaker_torch_distributed_enabled": "true",
                            "sagemaker_mpi_num_of_processes_per_host": "2"},
        "DebugHookConfig": {"S3OutputPath": "s3://sdlocal/jobs", "HookParameters": {"save_interval": "1"},
                            "CollectionConfigurations": [{"CollectionName": "losses"},
                                                         {"CollectionName": "gradients"}]},
        "DebugRuleConfigurations": RULES,
    }
    path = tmp_path / "torchrun.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _spec(tmp_path: Path, arguments: list[str]) -> Path:
    spec: dict[str, Any] = {
        "SourceDir": str(SCRIPTS),
        "AlgorithmSpecification": {
            # python3 is the training's interpreter (its `accelerate` console script, as `accelerate launch`)
            "ContainerEntrypoint": ["python3", "-m", "accelerate.commands.launch", "--multi_gpu",
                                    "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
                                    "--dynamo_backend", "no", "--main_process_port", "0"],
            "ContainerArguments": ["hf_trainer.py", *arguments]},
        "DebugHookConfig": {"S3OutputPath": "s3://sdlocal/jobs", "HookParameters": {"save_interval": "1", "include_workers": "all"},
                            "CollectionConfigurations": [{"CollectionName": "losses"},
                                                         {"CollectionName": "gradients"}]},
        "DebugRuleConfigurations": RULES,
    }
    path = tmp_path / "accelerate.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_hugging_face_trainer_under_accelerate_launch(tmp_path: Path, moto_server: str,
                                                      smdebug_python: Path) -> None:
    _need("transformers", "accelerate")
    tag = uuid.uuid4().hex[:6]
    job, torchrun = f"hf-accel-{tag}", f"hf-torchrun-{tag}"
    arguments = ["--max-steps", "8", "--eval-steps", "4", "--max-grad-norm", str(CLIP)]
    procs = {name: sdlocal(["run", str(spec), "--runtime", "process", "--job-name", name], tmp_path, moto_server)
             for name, spec in ((job, _spec(tmp_path, arguments)), (torchrun, _torchrun_spec(tmp_path)))}
    for proc in procs.values():
        out, err = proc.communicate(timeout=500)
        assert proc.returncode == 0, err[-4000:]
        assert {s["RuleConfigurationName"]: s["RuleEvaluationStatus"] for s in json.loads(out)} == \
            {"LossNotDecreasing": "NoIssuesFound"}
    job_dir = tmp_path / "jobs" / job
    log = json.loads(next(job_dir.rglob("log_history.json")).read_text())
    logged = [e for e in log if "loss" in e and "eval_loss" not in e]
    assert len(logged) == 8

    tensors = job_dir / "output" / "tensors"
    trial = create_trial(tensors)
    assert trial.training_ended()
    assert sorted(trial.workers()) == WORKERS
    assert trial.steps(mode=TRAIN) == list(range(8))
    # 16 evaluation examples in batches of 8 over 2 workers: one batch each per evaluation (after
    # optimizer steps 4 and 8)
    assert trial.steps(mode=EVAL) == list(range(2))
    loss = trial.tensor("loss_output_0")
    train = {w: [float(loss.value(s, mode=TRAIN, worker=w)) for s in range(8)] for w in WORKERS}
    evals = {w: [float(loss.value(s, mode=EVAL, worker=w)) for s in range(2)] for w in WORKERS}
    # each worker saved its own loss (its own shard of the data) and the Trainer logs their mean
    assert all(a != b for a, b in zip(train["worker_0"], train["worker_1"], strict=True))
    np.testing.assert_allclose(np.mean([train[w] for w in WORKERS], axis=0), [e["loss"] for e in logged], rtol=1e-3)
    np.testing.assert_allclose(np.mean([evals[w] for w in WORKERS], axis=0),
                               [e["eval_loss"] for e in log if "eval_loss" in e], rtol=1e-4)
    # gradients read after DDP's all-reduce and the clipping: the same on both workers, their norm
    # the logged norm before clipping, or CLIP when that was larger
    grads = trial.tensor_names(collection="gradients")
    assert len(grads) > 20
    for s, entry in enumerate(logged):
        per_worker = [[trial.tensor(g).value(s, mode=TRAIN, worker=w) for g in grads] for w in WORKERS]
        for a, b in zip(*per_worker, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-9)
        norm = np.sqrt(sum(float((v ** 2).sum()) for v in per_worker[0]))
        assert norm == pytest.approx(min(float(entry["grad_norm"]), CLIP), rel=1e-3)
    assert sorted(p.name for p in (tensors / "collections").rglob("*.json")) == \
        ["worker_0_collections.json", "worker_1_collections.json"]

    # the real smdebug opens the trial and reads the same
    read = subprocess.run([str(smdebug_python), "-c", READ_WITH_SMDEBUG, str(tensors)], capture_output=True,
                          text=True, timeout=120)
    assert read.returncode == 0, read.stderr[-3000:]
    seen = json.loads(read.stdout.strip().splitlines()[-1])
    assert seen["workers"] == WORKERS and seen["train"] == list(range(8)) and seen["eval"] == list(range(2))
    assert seen["gradients"] == len(grads)
    for w in WORKERS:
        np.testing.assert_allclose(seen["losses"][w], train[w], rtol=1e-6)

    # torchrun (torch_distributed), include_workers one: rank 0's trial, the model's gradients only
    trial = create_trial(tmp_path / "jobs" / torchrun / "output" / "tensors")
    assert trial.training_ended() and trial.workers() == ["worker_0"]
    assert trial.steps(mode=TRAIN) == list(range(6)) and trial.steps(mode=EVAL) == list(range(2))
    grads = trial.tensor_names(collection="gradients")
    assert len(grads) == len(set(grads)) > 20
    assert all(g.startswith("gradient/BertForSequenceClassification_") for g in grads)
