"""Helpers for the tests that run the training scripts of tests/compat/scripts/ (written in the style
of smdebug's and SageMaker's public examples): under `python -m sdlocal.hook.run`, under the real smdebug
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
ALL_CASES = {**COMPARED, "pruning": PRUNING, "no_hook": NO_HOOK, "late": LATE, "readme": README}


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
    """`python -m sdlocal.hook.run scripts/<script> ARGS` with this checkout first on PYTHONPATH."""
    workdir.mkdir(parents=True, exist_ok=True)
    env = _env(config, workdir)
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run([sys.executable, "-m", "sdlocal.hook.run", str(SCRIPTS / script), *args], cwd=workdir,
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
    from sdlocal.trial import create_trial
    from sdlocal.trial.modes import ModeKeys

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


# ---------------------------------------------------------------------------- `sdlocal run` jobs

def job_spec(case: Case, s3_output_path: str, rules: tuple[Mapping[str, Any], ...] = ()) -> dict[str, Any]:
    """The CreateTrainingJob request (plus EntryPoint/SourceDir) of a case; its own out_dir argument
    is left out: the script's default (SageMaker's tensors folder) or the job's config then applies."""
    args = dict(zip(case.args[::2], case.args[1::2], strict=True))
    return {
        "EntryPoint": case.script,
        "SourceDir": str(SCRIPTS),
        "HyperParameters": {k.lstrip("-"): v for k, v in args.items()},
        "DebugHookConfig": {
            "S3OutputPath": s3_output_path,
            "HookParameters": dict(case.hook_params),
            "CollectionConfigurations": [{"CollectionName": n, "CollectionParameters": dict(p)}
                                         for n, p in case.collections.items()],
        },
        "DebugRuleConfigurations": list(rules),
    }


def sdlocal_run(spec: Mapping[str, Any], job: str, home: Path, moto_server: str, runtime: str,
                timeout: float = 600) -> tuple[int, list[dict[str, Any]], str]:
    """`sdlocal run` as a subprocess; (exit code, rule statuses, stderr)."""
    spec_file = home / f"{job}.json"
    spec_file.parent.mkdir(parents=True, exist_ok=True)
    spec_file.write_text(json.dumps(spec))
    env = {**os.environ, "SDLOCAL_HOME": str(home), "PYTHONPATH": str(REPO)}
    env.pop("AWS_ENDPOINT_URL_S3", None)
    proc = subprocess.run([sys.executable, "-m", "sdlocal", "run", str(spec_file), "--job-name", job,
                           "--runtime", runtime, "--s3-endpoint-url", moto_server, "--json",
                           "--work-dir", str(home / "jobs" / job)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    rows = json.loads(proc.stdout) if proc.stdout.strip() else []
    return proc.returncode, rows, proc.stderr


def download(s3_client: Any, bucket: str, prefix: str, dest: Path) -> list[str]:
    """Every object under s3://bucket/prefix/ into dest (same relative paths); their keys."""
    keys = []
    for page in s3_client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
        for obj in page.get("Contents", []):
            rel = obj["Key"][len(prefix) + 1:]
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            s3_client.download_file(bucket, obj["Key"], str(dest / rel))
            keys.append(rel)
    return sorted(keys)


def reference(case: Case, workdir: Path) -> subprocess.Popen[str]:
    """The same script under hook.run, in the background (a job runs meanwhile)."""
    job = workdir / "job"
    workdir.mkdir(parents=True)
    (workdir / "debughookconfig.json").write_text(json.dumps(case.config(job)))
    args = [*case.args, *([case.out_arg, str(job)] if case.out_arg else [])]
    env = {**os.environ, "SMDEBUG_CONFIG_FILE_PATH": str(workdir / "debughookconfig.json"), "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "sdlocal.hook.run", str(SCRIPTS / case.script), *args], cwd=workdir,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def assert_job_lands_in_s3(case: Case, job: str, tmp_path: Path, moto_server: str, s3_client: Any, bucket: str,
                           runtime: str) -> None:
    """`sdlocal run` the case: its S3 debug-output is what the script saves under hook.run, and
    what the job's tensors folder holds."""
    ref = reference(case, tmp_path / "ref")
    code, _rows, err = sdlocal_run(job_spec(case, f"s3://{bucket}/jobs"), job, tmp_path / "home", moto_server,
                                   runtime)
    _out, ref_err = ref.communicate(timeout=300)
    assert ref.returncode == 0, ref_err[-3000:]
    assert code == 0, err[-3000:]
    assert "Training completed" in err
    keys = download(s3_client, bucket, f"jobs/{job}/debug-output", tmp_path / "s3")
    assert "training_job_end.ts" in keys and not [k for k in keys if k.endswith(".tmp")]
    local = tmp_path / "home" / "jobs" / job / "output" / "tensors"
    # every file but the hook's step record, which is for the launcher (hook/step_record.py)
    assert sorted(str(p.relative_to(local)) for p in local.rglob("*") if p.is_file() and p.name != ".sdlocal-steps.json") == keys
    landed = dump_ours(tmp_path / "s3")
    assert_same_trial(landed, dump_ours(tmp_path / "ref" / "job"))
    assert len(landed["tensors"]) >= 3
    log = (tmp_path / "home" / "jobs" / job / "logs" / "training.log").read_text()
    assert "already writes to" not in log  # one hook wrote


def assert_own_out_dir_not_uploaded(own: Path, job: str, tmp_path: Path, moto_server: str, s3_client: Any,
                                    bucket: str, runtime: str) -> None:
    """explicit_hook.py with --smdebug_path `own` (not the job's folder): nothing of it in S3."""
    spec = job_spec(COMPARED["explicit"], f"s3://{bucket}/jobs")
    spec["HyperParameters"]["smdebug_path"] = str(own)
    code, _rows, err = sdlocal_run(spec, job, tmp_path / "home", moto_server, runtime)
    assert code == 0, err[-3000:]
    keys = download(s3_client, bucket, f"jobs/{job}/debug-output", tmp_path / "s3")
    assert keys == ["training_job_end.ts"]  # the platform's end marker only: nothing of the hook's
    log = (tmp_path / "home" / "jobs" / job / "logs" / "training.log").read_text()
    assert f"this hook writes to {own}, not to the job's tensors folder" in log


def assert_rules_see_the_scripts_hook(job: str, tmp_path: Path, moto_server: str, bucket: str,
                                      runtime: str) -> None:
    rules = ({"RuleConfigurationName": "LossNotDecreasing",
              "RuleParameters": {"rule_to_invoke": "LossNotDecreasing", "num_steps": "2"}},
             {"RuleConfigurationName": "VanishingGradient",
              "RuleParameters": {"rule_to_invoke": "VanishingGradient"}})
    code, rows, err = sdlocal_run(job_spec(COMPARED["json"], f"s3://{bucket}/jobs", rules), job,
                                  tmp_path / "home", moto_server, runtime)
    assert code == 0, err[-3000:]
    statuses = {r["RuleConfigurationName"]: r["RuleEvaluationStatus"] for r in rows}
    assert set(statuses) == {"LossNotDecreasing", "VanishingGradient"}
    assert set(statuses.values()) <= {"NoIssuesFound", "IssuesFound"}, rows
