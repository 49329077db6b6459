"""Helpers for the tests that run the training scripts of tests/compat/scripts/ (written in the style
of smdebug's and SageMaker's public examples): under `python -m hook.run`, under the real smdebug
1.0.34 (side virtualenv), and dumps of the trials they write, read by our reader or by smdebug's."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).resolve().parent / "scripts"

# A trial as {"tensors": {name: {"MODE:step": [shape, sum, sum of |x|, {reduction: value}]}},
# "collections": {name: [tensor names]}}; the same code runs on our reader and on smdebug's.
DUMP = r'''
import numpy as np

def dump(tr, modes):
    tensors = {}
    for name in tr.tensor_names():
        t = tr.tensor(name)
        per = {}
        for m in modes:
            for s in t.steps(mode=m):
                try:
                    v = np.asarray(t.value(s, mode=m), dtype=np.float64)
                    raw = [list(v.shape), float(v.sum()), float(np.abs(v).sum())]
                except Exception:  # only reductions were saved
                    raw = [None, None, None]
                try:
                    reds = {f"{'abs_' if a else ''}{r}": float(x) for (r, a), x in t.reduction_values(s, mode=m).items()}
                except Exception:
                    reds = {}
                per[f"{m.name}:{s}"] = raw + [reds]
        tensors[name] = per
    colls = {c: sorted(tr.collection(c).tensor_names) for c in tr.collections()}
    return {"tensors": tensors, "collections": colls}
'''

SMDEBUG_DUMP = DUMP + r'''
import json, sys
from smdebug.trials import create_trial
from smdebug.core.modes import ModeKeys
print(json.dumps([dump(create_trial(path), list(ModeKeys)) for path in sys.argv[1:]]))
'''


@dataclass(frozen=True)
class Case:
    """A script of scripts/ and the DebugHookConfig of its job."""

    script: str
    hook_params: Mapping[str, str] = field(default_factory=dict)
    collections: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    out_arg: str | None = None  # the script's own out_dir argument, if it takes one
    args: tuple[str, ...] = ()

    def config(self, local_path: Path) -> dict[str, Any]:
        return hook_config(local_path, self.hook_params, self.collections)


GRADCAM_COLLECTION = ".*bn|.*bias|.*downsample|.*ResNet_input|.*image|.*fc_output|.*CrossEntropyLoss"
PRUNING_COLLECTION = ".*relu|.*weight|.*bias|.*running_mean|.*running_var|.*CrossEntropyLoss"

# Scripts whose hook saves exactly what smdebug 1.0.34's hook saves for them.
COMPARED = {
    "explicit": Case("explicit_hook.py", {"save_interval": "1"}, {"weights": {}}, out_arg="--smdebug_path"),
    "json": Case("json_hook.py", {"save_interval": "2"}, {"weights": {}, "biases": {}, "gradients": {}}),
    "get_hook": Case("get_hook_script.py", {"save_interval": "2", "eval.save_interval": "1"},
                     {"weights": {}, "gradients": {}}),
    "gradcam": Case("gradcam_train.py", {}, {"custom_collection": {
        "include_regex": GRADCAM_COLLECTION, "train.save_interval": "2", "eval.save_interval": "1"}}),
    "scalars": Case("scalars_tensors.py", {"save_interval": "1"}, {"weights": {}}),
    "modes": Case("modes_hook.py", {}, {}, out_arg="--out-dir"),
}
# Scripts smdebug 1.0.34 cannot run as they are (pruning: smdebug < 0.7's module_maps) or that
# need sdlocal (no hook, a hook created late, sdlocal's own hook).
PRUNING = Case("pruning_train.py", {}, {"custom_collection": {"include_regex": PRUNING_COLLECTION,
                                                                "save_interval": "2"}})
NO_HOOK = Case("no_hook.py", {"save_interval": "2"}, {"weights": {}, "gradients": {}, "relu_output": {}})
LATE = Case("late_hook.py", {"save_interval": "1"}, {"weights": {}, "relu_output": {}}, args=("--warmup", "3"))
README = Case("readme_explicit.py", {"save_interval": "1"}, {"weights": {}})


def hook_config(local_path: Path, hook_params: Mapping[str, str] | None = None,
                collections: Mapping[str, Mapping[str, str]] | None = None) -> dict[str, Any]:
    return {
        "LocalPath": str(local_path),
        "HookParameters": dict(hook_params or {}),
        "CollectionConfigurations": [{"CollectionName": n, "CollectionParameters": dict(p)}
                                     for n, p in (collections or {}).items()],
    }


def _env(config: Mapping[str, Any] | None, workdir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SMDEBUG_CONFIG_FILE_PATH", "TRAINING_JOB_NAME")}
    cfg_path = workdir / "debughookconfig.json"
    if config is not None:
        cfg_path.write_text(json.dumps(config))
    env["SMDEBUG_CONFIG_FILE_PATH"] = str(cfg_path)  # no file: no hook config, as without DebugHookConfig
    return env


def run_hook_run(script: str, workdir: Path, config: Mapping[str, Any] | None, *args: str,
                 timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`python -m hook.run scripts/<script> ARGS` with this checkout first on PYTHONPATH."""
    workdir.mkdir(parents=True, exist_ok=True)
    env = _env(config, workdir)
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run([sys.executable, "-m", "hook.run", str(SCRIPTS / script), *args], cwd=workdir,
                          env=env, capture_output=True, text=True, timeout=timeout)


def run_smdebug(python: Path, script: str, workdir: Path, config: Mapping[str, Any] | None, *args: str,
                timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """The same script with the real smdebug (plain `python script`, as in a bring-your-own container)."""
    workdir.mkdir(parents=True, exist_ok=True)
    env = _env(config, workdir)
    env.pop("PYTHONPATH", None)
    return subprocess.run([str(python), str(SCRIPTS / script), *args], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=timeout)


def dump_ours(path: Path) -> dict[str, Any]:
    from trial import create_trial
    from trial.modes import ModeKeys

    scope: dict[str, Any] = {}
    exec(DUMP, scope)
    return scope["dump"](create_trial(path), list(ModeKeys))  # type: ignore[no-any-return]


def dump_smdebug(python: Path, *paths: Path) -> list[dict[str, Any]]:
    """The trials read by the real smdebug's reader (one process for all: its import is slow)."""
    proc = subprocess.run([str(python), "-c", SMDEBUG_DUMP, *map(str, paths)], capture_output=True, text=True,
                          timeout=300, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def steps_of(dumped: Mapping[str, Any]) -> dict[str, list[str]]:
    """{tensor: ["TRAIN:0", "EVAL:1", ...]}: which tensors at which steps."""
    return {name: sorted(per) for name, per in dumped["tensors"].items()}


def assert_same_trial(ours: Mapping[str, Any], theirs: Mapping[str, Any], *, rel: float = 1e-5,
                      skip: tuple[str, ...] = ()) -> None:
    """Same tensors at the same steps with the same values (and reductions)."""
    ours_t = {n: v for n, v in ours["tensors"].items() if not (skip and n.startswith(skip))}
    theirs_t = {n: v for n, v in theirs["tensors"].items() if not (skip and n.startswith(skip))}
    assert sorted(ours_t) == sorted(theirs_t)
    for name, per in theirs_t.items():
        assert sorted(ours_t[name]) == sorted(per), name
        for key, (shape, total, abs_total, reds) in per.items():
            o_shape, o_total, o_abs, o_reds = ours_t[name][key]
            assert o_shape == shape, (name, key)
            if total is not None:
                assert abs(o_total - total) <= rel * max(1.0, abs(total)), (name, key, o_total, total)
                assert abs(o_abs - abs_total) <= rel * max(1.0, abs_total), (name, key)
            assert sorted(o_reds) == sorted(reds), (name, key)
            for r, x in reds.items():
                assert abs(o_reds[r] - x) <= rel * max(1.0, abs(x)), (name, key, r)
