"""End to end: unchanged Hugging Face Trainer and Lightning scripts (tests/hook/scripts) under the
real `sdlocal run` (process runtime) with a DebugHookConfig and rules; unchanged plain loops
(distillation, GAN, a transformer evaluated with a padding mask) under `python -m sdlocal.hook.run`.
The trials' losses, gradients and modes, and the rules' verdicts, are checked."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from sdlocal.trial import create_trial
from sdlocal.trial.modes import ModeKeys
from tests.conftest import missing
from tests.helpers import run_jobs

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "tests" / "hook" / "scripts"
TRAIN, EVAL = ModeKeys.TRAIN, ModeKeys.EVAL


def _need(*modules: str) -> None:
    import importlib.util

    for m in modules:
        if importlib.util.find_spec(m) is None:
            missing(f"{m} is not installed (pip install '.[hf]')")


def _spec(tmp_path: Path, name: str, entry: str, hyper: dict[str, str], rules: list[dict[str, Any]],
          tensorboard: bool = False, *more: dict[str, Any]) -> Path:
    collections = [{"CollectionName": "losses"}, {"CollectionName": "gradients"}, *more]
    spec: dict[str, Any] = {
        "EntryPoint": entry, "SourceDir": str(SCRIPTS), "HyperParameters": hyper,
        "DebugHookConfig": {"S3OutputPath": "s3://sdlocal/jobs", "HookParameters": {"save_interval": "1"},
                            "CollectionConfigurations": collections},
        "DebugRuleConfigurations": rules,
    }
    if tensorboard:
        spec["TensorBoardOutputConfig"] = {"S3OutputPath": "s3://sdlocal/tb"}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _rule(name: str, **params: str) -> dict[str, Any]:
    return {"RuleConfigurationName": name, "RuleParameters": {"rule_to_invoke": name, **params}}


def _run_all(tmp_path: Path, moto_server: str, jobs: dict[str, Path]) -> dict[str, dict[str, str]]:
    return run_jobs(jobs, tmp_path, moto_server, "process", timeout=500)


def _trial(tmp_path: Path, job: str) -> Any:
    trial = create_trial(tmp_path / "jobs" / job / "output" / "tensors")
    assert trial.training_ended()
    return trial


def _losses(trial: Any, mode: ModeKeys) -> list[float]:
    loss = trial.tensor("loss_output_0")
    return [float(loss.value(s, mode=mode)) for s in loss.steps(mode=mode)]


LOSS_RULE = _rule("LossNotDecreasing", num_steps="2")  # diff_percent 0.1: an exactly constant loss fires


def test_hugging_face_trainer_unchanged(tmp_path: Path, moto_server: str) -> None:
    _need("transformers", "accelerate")
    tag = uuid.uuid4().hex[:6]
    # VanishingGradient is not run on the healthy BERT: its attention key biases get no gradient at
    # all (a softmax ignores a shift), so the rule rightly fires on every BERT; checked below instead.
    rules = [LOSS_RULE]
    hyper = {"max-steps": "12", "grad-accum": "2", "eval-steps": "4", "max-grad-norm": "0.5"}
    jobs = {
        f"hf-ok-{tag}": _spec(tmp_path, "ok", "hf_trainer.py", {**hyper, "report-to": "tensorboard"}, rules,
                              tensorboard=True),
        f"hf-up-{tag}": _spec(tmp_path, "up", "hf_trainer.py", {"case": "diverging", "max-steps": "10"}, rules),
        f"hf-flat-{tag}": _spec(tmp_path, "flat", "hf_trainer.py", {"case": "constant", "max-steps": "8"}, rules),
        f"hf-vanish-{tag}": _spec(tmp_path, "vanish", "hf_trainer.py", {"case": "vanishing", "max-steps": "6"},
                                  [_rule("VanishingGradient", threshold="1e-7")]),
        f"hf-own-{tag}": _spec(tmp_path, "own", "hf_trainer.py",
                               {"max-steps": "6", "eval-steps": "3", "smdebug-callback": "true"}, [], False,
                               {"CollectionName": "logits",
                                "CollectionParameters": {"include_regex": "classifier_output_0"}}),
    }
    ok, up, flat, vanish, own = jobs
    verdicts = _run_all(tmp_path, moto_server, jobs)
    assert verdicts[ok] == {"LossNotDecreasing": "NoIssuesFound"}
    assert verdicts[up]["LossNotDecreasing"] == "IssuesFound"
    assert verdicts[flat]["LossNotDecreasing"] == "IssuesFound"
    assert verdicts[vanish]["VanishingGradient"] == "IssuesFound"

    # 12 optimizer steps of 2 micro-batches each = 12 TRAIN steps; an evaluation (2 batches of 8)
    # after optimizer steps 4, 8 and 12.
    trial = _trial(tmp_path, ok)
    assert trial.steps(mode=TRAIN) == list(range(12)) and trial.steps(mode=EVAL) == list(range(6))
    assert [trial.mode_modestep(s)[0] for s in range(6)] == [TRAIN] * 4 + [EVAL] * 2
    assert trial.tensor_names(collection="losses") == ["loss_output_0"]
    # the TRAIN loss is what the Trainer logs as `loss` (logging_steps=1), step for step
    log = json.loads(next((tmp_path / "jobs" / ok).rglob("log_history.json")).read_text())
    logged = [e for e in log if "loss" in e and "eval_loss" not in e]
    np.testing.assert_allclose(_losses(trial, TRAIN), [e["loss"] for e in logged], rtol=1e-3)
    evals = _losses(trial, EVAL)
    np.testing.assert_allclose([np.mean(evals[i:i + 2]) for i in (0, 2, 4)],
                               [e["eval_loss"] for e in log if "eval_loss" in e], rtol=1e-4)
    # gradients: TRAIN steps only, read after clipping (max_grad_norm 0.5): their norm is the logged
    # norm before clipping, or 0.5 when that was larger (it was at some steps)
    grads = trial.tensor_names(collection="gradients")
    assert len(grads) > 20 and all(trial.tensor(g).steps(mode=EVAL) == [] for g in grads)
    for s, entry in enumerate(logged):
        norm = np.sqrt(sum(float((trial.tensor(g).value(s, mode=TRAIN) ** 2).sum()) for g in grads))
        assert norm == pytest.approx(min(float(entry["grad_norm"]), 0.5), rel=1e-3)
    assert any(float(e["grad_norm"]) > 0.5 for e in logged) and any(float(e["grad_norm"]) < 0.5 for e in logged)
    ffn = "gradient/BertForSequenceClassification_bert.encoder.layer.0.intermediate.dense.weight"
    assert np.abs(trial.tensor(ffn).value(0, mode=TRAIN)).mean() > 1e-6
    # TensorBoardOutputConfig: the hook's scalars (the losses, per mode) for TensorBoard
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tmp_path / "jobs" / ok / "output" / "tensorboard"), size_guidance={"scalars": 0})
    acc.Reload()
    assert [e.step for e in acc.Scalars("train/loss_output_0")] == [0, 1, 2, 3, 6, 7, 8, 9, 12, 13, 14, 15]
    assert [e.step for e in acc.Scalars("eval/loss_output_0")] == [4, 5, 10, 11, 16, 17]

    assert np.abs(_trial(tmp_path, vanish).tensor(ffn).value(0, mode=TRAIN)).mean() < 1e-10
    up_losses = _losses(_trial(tmp_path, up), TRAIN)
    assert up_losses[-1] > 10 * up_losses[0]
    assert len(set(_losses(_trial(tmp_path, flat), TRAIN))) == 1

    # the script's own smdebug TrainerCallback: its hook is the job's only one (no loss_output_0 of
    # the zero-code hook), and its evaluation batches are EVAL steps
    trial = _trial(tmp_path, own)
    assert trial.steps(mode=TRAIN) == list(range(6)) and trial.steps(mode=EVAL) == list(range(4))
    assert trial.steps(mode=ModeKeys.GLOBAL) == list(range(10))
    assert "loss_output_0" not in trial.tensor_names()
    assert trial.tensor("classifier_output_0").steps(mode=EVAL) == list(range(4))
    grads = trial.tensor_names(collection="gradients")
    assert len(grads) > 20 and all(len(trial.tensor(g).steps()) == 6 for g in grads)


def test_lightning_unchanged(tmp_path: Path, moto_server: str) -> None:
    _need("lightning")
    tag = uuid.uuid4().hex[:6]
    ok, up = f"pl-ok-{tag}", f"pl-up-{tag}"
    jobs = {ok: _spec(tmp_path, "ok", "lightning_train.py", {"grad-accum": "2"}, [LOSS_RULE]),
            up: _spec(tmp_path, "up", "lightning_train.py", {"case": "diverging", "val-every": "100"}, [LOSS_RULE])}
    verdicts = _run_all(tmp_path, moto_server, jobs)
    assert verdicts == {ok: {"LossNotDecreasing": "NoIssuesFound"}, up: {"LossNotDecreasing": "IssuesFound"}}
    # 12 optimizer steps of 2 batches = 12 TRAIN steps; validation (2 batches) after steps 4, 8, 12;
    # the sanity check's 2 batches save nothing
    trial = _trial(tmp_path, ok)
    assert trial.steps(mode=TRAIN) == list(range(12)) and trial.steps(mode=EVAL) == list(range(6))
    assert [trial.mode_modestep(s)[0] for s in range(6)] == [TRAIN] * 4 + [EVAL] * 2
    train, evals = _losses(trial, TRAIN), _losses(trial, EVAL)
    assert 0.4 < train[0] < 1.2 and 0.4 < evals[0] < 1.2  # a 2-class cross entropy: the mean, not a half
    grads = trial.tensor_names(collection="gradients")
    assert grads == [f"gradient/Classifier_net.{i}.{p}" for i in (0, 2) for p in ("bias", "weight")]
    assert all(trial.tensor(g).steps(mode=TRAIN) == list(range(12)) and not trial.tensor(g).steps(mode=EVAL)
               for g in grads)
    up_losses = _losses(_trial(tmp_path, up), TRAIN)
    assert max(up_losses) > 10 * up_losses[0]


def _hook_run(tmp_path: Path, case: str) -> tuple[subprocess.CompletedProcess[str], Any]:
    out = tmp_path / case
    config = {"LocalPath": str(out), "HookParameters": {"save_interval": "1"},
              "CollectionConfigurations": [{"CollectionName": "losses"}, {"CollectionName": "weights"},
                                           {"CollectionName": "gradients"},
                                           {"CollectionName": "outputs", "CollectionParameters":
                                            {"include_regex": ".*_output_0"}}]}
    (tmp_path / f"{case}.json").write_text(json.dumps(config))
    env = {**os.environ, "SMDEBUG_CONFIG_FILE_PATH": str(tmp_path / f"{case}.json")}
    proc = subprocess.run([sys.executable, "-m", "sdlocal.hook.run", str(SCRIPTS / "plain_loops.py"),
                           "--case", case], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, create_trial(out)


def test_plain_loops_unchanged(tmp_path: Path) -> None:
    # distillation: the student (held by the optimizer) is watched, the frozen teacher is not; the
    # functional loss backpropagated is the loss
    _, trial = _hook_run(tmp_path, "distill")
    assert trial.steps(mode=TRAIN) == list(range(6))
    assert {n for n in trial.tensor_names() if n.startswith("gradient/")} == \
        {"gradient/Sequential_0.weight", "gradient/Sequential_0.bias"}
    assert "Sequential_2.weight" not in trial.tensor_names()  # the teacher's last layer
    assert trial.tensor_names(collection="losses") == ["loss_output_0"]
    assert len(trial.tensor("loss_output_0").steps()) == 6
    # a GAN: both models watched (two optimizers), both losses saved in the order backpropagated
    _, trial = _hook_run(tmp_path, "gan")
    names = set(trial.tensor_names())
    for model in ("Generator", "Discriminator"):
        assert {f"gradient/{model}_net.0.weight", f"{model}_net.2.weight"} <= names
    assert "Discriminator.net.2_output_0" in names
    assert trial.tensor_names(collection="losses") == ["loss_output_0", "loss_output_1"]
    d0, g0 = (float(trial.tensor(n).value(0)) for n in ("loss_output_0", "loss_output_1"))
    assert d0 > 1.0 and 0.3 < g0 < 1.2  # BCE: the discriminator's two terms, the generator's one
    # a transformer evaluated with a padding mask: the encoder's nested outputs are skipped, each
    # said once, and the training goes on
    proc, trial = _hook_run(tmp_path, "masked")
    assert "done" in proc.stdout
    said = [line for line in proc.stderr.splitlines() if "is a nested tensor: not saved" in line]
    assert said and len(said) == len(set(said))
    assert "encoder.layers.0_output_0 is a nested tensor" in proc.stderr
    assert trial.steps(mode=TRAIN) == list(range(6)) and trial.steps(mode=EVAL) == list(range(6))
    out = trial.tensor("encoder.layers.0_output_0")
    assert out.steps(mode=TRAIN) == list(range(6)) and out.steps(mode=EVAL) == []
