"""smdebug's analysis API where users run it: a notebook (a fresh Python with sdlocal installed,
no real smdebug) opening a finished trial, a trial on S3, and a live trial it waits on; the
exceptions of `smdebug.exceptions` against the real smdebug's; the real smdebug's mode enum."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sdlocal.trial import Collection, ModeKeys, TrialWriter, create_trial
from sdlocal.trial.kinds import LocalTrial, S3Trial
from sdlocal.trial.smdebug_shim import compat_dir, use_sdlocal_smdebug
from tests.conftest import REPO_ROOT
from tests.evaluator.test_main import upload_dir


def user_env(**extra: str) -> dict[str, str]:
    """A user's Python with sdlocal installed: its smdebug package and its modules importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SDLOCAL_")}
    env["PYTHONPATH"] = os.pathsep.join([str(compat_dir()), str(REPO_ROOT)])
    env.update(extra)
    return env


def notebook(code: str, *args: str, env: dict[str, str] | None = None, timeout: float = 120) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], env=env or user_env(),
                          capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT.parent)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


ANALYSIS = """
import json, sys
import smdebug
from smdebug import modes
from smdebug.trials import create_trial
from smdebug.core.collection import CollectionKeys
from smdebug.core.tensor import StepState
from smdebug.exceptions import TensorUnavailableForStep, StepUnavailable, TensorUnavailable
from smdebug.analysis.utils import no_refresh

trial = create_trial(sys.argv[1])
out = {"sdlocal": smdebug.SDLOCAL, "torch": "torch" in sys.modules}
out["steps"] = len(trial.steps())
out["modes"] = [m.name for m in trial.modes()]
out["eval_steps"] = trial.steps(mode=modes.EVAL)
out["first_eval_global"] = trial.global_step(modes.EVAL, 0)
out["weights"] = trial.tensor_names(collection=CollectionKeys.WEIGHTS)
loss = trial.tensor("CrossEntropyLoss_output_0")
out["same_loss"] = bool(loss.value(0, mode=modes.EVAL) == loss.value(step_num=out["first_eval_global"]))
out["passed"] = trial.has_passed_step(3, mode=modes.EVAL) == StepState.AVAILABLE
with no_refresh(trial):
    out["prev"] = loss.prev_steps(3, n=2, mode=modes.EVAL)
errors = []
for call in (lambda: trial.tensor("gradient/Sequential_fc0.weight").value(0, mode=modes.EVAL),
             lambda: loss.value(10_000), lambda: trial.tensor("nope")):
    try:
        call()
    except (TensorUnavailableForStep, StepUnavailable, TensorUnavailable) as e:
        errors.append(type(e).__name__)
out["errors"] = errors
print(json.dumps(out))
"""


def test_notebook_reads_a_finished_trial(fixture_trials: Path) -> None:
    out = notebook(ANALYSIS, str(fixture_trials / "healthy_eval"))
    assert out == {
        "sdlocal": True, "torch": False, "steps": 88, "modes": ["TRAIN", "EVAL"], "eval_steps": list(range(8)),
        "first_eval_global": 10, "weights": ["Sequential_fc0.weight", "Sequential_fc1.weight", "Sequential_head.weight"],
        "same_loss": True, "passed": True, "prev": [2, 3],
        "errors": ["TensorUnavailableForStep", "StepUnavailable", "TensorUnavailable"],
    }


def test_notebook_reads_a_trial_on_s3(fixture_trials: Path, s3_client: Any, bucket: str, moto_server: str) -> None:
    upload_dir(s3_client, bucket, fixture_trials / "healthy_eval", "jobs/j1/debug-output")
    out = notebook(ANALYSIS, f"s3://{bucket}/jobs/j1/debug-output", env=user_env(AWS_ENDPOINT_URL_S3=moto_server))
    assert out["steps"] == 88 and out["eval_steps"] == list(range(8)) and out["same_loss"]
    assert out["errors"] == ["TensorUnavailableForStep", "StepUnavailable", "TensorUnavailable"]


LIVE = """
import json, sys
from smdebug.trials import create_trial
from smdebug.rules.rule import Rule
from smdebug.rules.rule_invoker import invoke_rule
from smdebug.exceptions import NoMoreData

trial = create_trial(sys.argv[1], collections_timeout=60)  # the job has written nothing yet
print("opened", flush=True)
trial.wait_for_steps([3])
print(json.dumps({"steps": trial.steps(), "loss3": float(trial.tensor("loss").value(3))}), flush=True)

class LossAbove(Rule):
    def __init__(self, base_trial, threshold):
        super().__init__(base_trial, action_str="")
        self.threshold = float(threshold)
        self.fired = []
    def set_required_tensors(self, step):
        self.req_tensors.add("loss", steps=[step])
    def invoke_at_step(self, step):
        if float(self.req_tensors.get()[0].value(step)) > self.threshold:
            self.fired.append(step)
            return True
        return False

rule = LossAbove(trial, "4.5")
try:
    invoke_rule(rule)  # follows the live training until it ends
    ended = "completed"
except NoMoreData:
    ended = "NoMoreData"
print(json.dumps({"fired": rule.fired, "ended": ended, "steps": trial.steps()}), flush=True)
"""


def test_notebook_follows_a_live_trial(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", LIVE, str(tmp_path / "job")], env=user_env(), cwd=REPO_ROOT.parent,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)
        w = TrialWriter(tmp_path / "job")
        w.write_collections([Collection("losses", include_regex=("loss",))])
        assert proc.stdout is not None and proc.stdout.readline().strip() == "opened"
        for s in range(4):
            w.write_step(s, ModeKeys.TRAIN, s, [("loss", np.float32(s))])
        assert json.loads(proc.stdout.readline()) == {"steps": [0, 1, 2, 3], "loss3": 3.0}
        time.sleep(0.5)
        for s in range(4, 7):
            w.write_step(s, ModeKeys.TRAIN, s, [("loss", np.float32(s))])
            time.sleep(0.3)
        w.write_end_marker()
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert json.loads(out.strip().splitlines()[-1]) == {"fired": [5, 6], "ended": "completed", "steps": list(range(7))}


def test_create_trial_without_collections_after_training_ended(tmp_path: Path) -> None:
    TrialWriter(tmp_path).write_end_marker()
    out = notebook("""
        import json, sys
        from smdebug.trials import create_trial
        from smdebug.exceptions import MissingCollectionFiles
        try:
            create_trial(sys.argv[1])
        except MissingCollectionFiles as e:
            print(json.dumps(str(e)))
    """, str(tmp_path))
    assert out == "Training job has ended. All the collection files could not be loaded"


def test_local_and_s3_trial_classes(fixture_trials: Path, s3_client: Any, bucket: str) -> None:
    local = LocalTrial("mine", str(fixture_trials / "healthy"), range_steps=(10, 20))
    assert local.name == "mine" and local.steps() == list(range(10, 20)) and local.trial_dir.endswith("healthy")
    upload_dir(s3_client, bucket, fixture_trials / "healthy", "a/b")
    s3 = S3Trial("job", bucket, "a/b/", s3_client=s3_client)
    assert (s3.bucket_name, s3.prefix_name) == (bucket, "a/b/") and len(s3.steps()) == 60
    with pytest.raises(ValueError, match="begin is less than end"):
        LocalTrial("x", str(fixture_trials / "healthy"), range_steps=(5, 5))


def _normalized(message: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"\.(?=[A-Z])", ". ", message)).strip()


SAMPLES = {"step": 5, "tname": "t", "has_reductions": True, "last_step": 9, "rule_name": "R", "end_of_rule": True,
           "message": "m", "c_name": "c", "worker": "w", "timestamp": 12}

REAL_EXCEPTIONS = """
import inspect, json, sys
import smdebug.exceptions as ex
from smdebug.core.modes import ModeKeys
samples = json.loads(sys.argv[1])
out = {}
for name, cls in vars(ex).items():
    if not (inspect.isclass(cls) and issubclass(cls, Exception)) or cls.__module__ != ex.__name__:
        continue
    params = [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "args", "kwargs")]
    args = [ModeKeys.TRAIN if p == "mode" else samples[p] for p in params]
    plain = cls.__init__ is Exception.__init__
    out[name] = {"params": params, "plain": plain, "message": str(cls("msg") if plain else cls(*args)),
                 "bases": sorted(b.__name__ for b in cls.__mro__ if b is not cls and b is not object)}
print(json.dumps(out))
"""


@pytest.mark.interop
def test_exceptions_are_smdebugs(smdebug_python: Path) -> None:
    import inspect

    use_sdlocal_smdebug()  # this process may have found another checkout's compat package first
    import smdebug.exceptions as ours

    proc = subprocess.run([str(smdebug_python), "-c", REAL_EXCEPTIONS, json.dumps(SAMPLES)], capture_output=True,
                          text=True, timeout=120, cwd="/")
    assert proc.returncode == 0, proc.stderr
    real = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(real) >= 19 and set(real) <= set(ours.__all__)
    for name, expected in real.items():
        cls = getattr(ours, name)
        params = [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "args", "kwargs")]
        assert params[: len(expected["params"])] == expected["params"], name
        args = [ModeKeys.TRAIN if p == "mode" else SAMPLES[p] for p in expected["params"]]
        made = cls("msg") if expected["plain"] else cls(*args)
        assert _normalized(str(made)).startswith(_normalized(expected["message"])), name
        assert issubclass(cls, ours.SMDebugError) and all(
            any(b.__name__ == base for b in cls.__mro__) for base in expected["bases"] if base != "SMDebugError"), name


@pytest.mark.interop
def test_the_real_smdebugs_mode_enum_is_accepted(smdebug_python: Path, fixture_trials: Path) -> None:
    (modes_py,) = smdebug_python.parent.parent.glob("lib/python*/site-packages/smdebug/core/modes.py")
    spec = importlib.util.spec_from_file_location("real_smdebug_modes", modes_py)
    assert spec is not None and spec.loader is not None
    real = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(real)
    trial = create_trial(fixture_trials / "healthy_eval")
    assert trial.steps(mode=real.ModeKeys.EVAL) == list(range(8))
    assert trial.global_step(real.ModeKeys.EVAL, 1) == 21
    loss = trial.tensor("CrossEntropyLoss_output_0")
    assert loss.value(1, mode=real.ModeKeys.EVAL) == loss.value(21)
    assert trial.tensor_names(step=1, mode=real.ModeKeys.EVAL) == trial.tensor_names(step=21)
