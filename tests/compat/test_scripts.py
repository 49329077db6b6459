"""Training scripts in the style of smdebug's and SageMaker's public examples (tests/compat/scripts/),
run for real under `python -m sdlocal.hook.run`: what their hook saves is what smdebug 1.0.34's hook saves
for the same script (same tensors, steps, values, reductions), smdebug's reader opens it, the
zero-code hook never writes beside the script's hook, and scripts smdebug cannot run (the pruning
example's hook, a hook created after a forward) save what sdlocal documents."""
from __future__ import annotations

from pathlib import Path

import pytest

from sdlocal.trial import create_trial
from tests.compat._scripts import (
    COMPARED,
    LATE,
    NO_HOOK,
    PRUNING,
    README,
    Case,
    assert_same_trial,
    dump_ours,
    dump_smdebug,
    run_hook_run,
    run_smdebug,
    steps_of,
)

pytestmark = pytest.mark.slow


def run_ours(case: Case, workdir: Path) -> Path:
    """The script under hook.run in a job whose tensors folder is workdir/job; returns its trial."""
    job = workdir / "job"
    args = list(case.args)
    trial = job
    if case.out_arg:
        trial = workdir / "own"
        args += [case.out_arg, str(trial)]
    proc = run_hook_run(case.script, workdir, case.config(job), *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "already writes to" not in proc.stderr  # never a second hook on the folder
    if case.out_arg:  # its own folder: the zero-code hook stood down, the job's folder stays empty
        assert not job.exists(), sorted(p.name for p in job.rglob("*"))
        assert "not uploaded to the job's debug-output" in proc.stderr
    return trial


class Runs:
    """Each sdlocal-only script runs once for this module (a run costs seconds of torch import)."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.trials: dict[str, Path] = {}

    def __call__(self, key: str, case: Case) -> Path:
        if key not in self.trials:
            self.trials[key] = run_ours(case, self.base / key)
        return self.trials[key]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    return Runs(tmp_path_factory.mktemp("runs"))


LATE_1 = Case(LATE.script, LATE.hook_params, LATE.collections, args=("--warmup", "1"))
SDLOCAL_ONLY = {"pruning": PRUNING, "no_hook": NO_HOOK, "late": LATE, "late_1": LATE_1, "readme": README}


@pytest.mark.interop
@pytest.mark.parametrize("name", sorted(COMPARED))
def test_script_saves_what_smdebug_saves(name: str, tmp_path: Path, smdebug_python: Path) -> None:
    case = COMPARED[name]
    ours = run_ours(case, tmp_path / "ours")
    theirs = tmp_path / "smdebug" / "job"
    args = [*case.args, *([case.out_arg, str(theirs)] if case.out_arg else [])]
    proc = run_smdebug(smdebug_python, case.script, tmp_path / "smdebug", case.config(theirs), *args)
    assert proc.returncode == 0, proc.stderr[-3000:]

    expected, ours_by_smdebug = dump_smdebug(smdebug_python, theirs, ours)
    assert len(expected["tensors"]) >= 5
    ours_by_us = dump_ours(ours)
    assert_same_trial(ours_by_us, expected)  # our hook read by our reader == smdebug's hook and reader
    assert_same_trial(ours_by_smdebug, expected)  # smdebug's reader opens ours
    # Our collections file lists every tensor saved in each collection. smdebug's is written once,
    # after the first saved step, so it lacks tensors first saved later (e.g. in EVAL): a subset.
    for coll, names in expected["collections"].items():
        assert set(names) <= set(ours_by_us["collections"][coll]), coll
        assert set(ours_by_us["collections"][coll]) <= set(ours_by_us["tensors"]), coll
    tr = create_trial(ours)
    assert tr.training_ended() and tr.workers() == ["worker_0"]


def test_pruning_example_hook(runs: Runs) -> None:
    """The pruning example's hook (module_maps, its own counters in the names, gradients of every
    module output) and the names its model_resnet.py and check_accuracy rule read."""
    trial = runs("pruning", PRUNING)
    got = steps_of(dump_ours(trial))
    # 2 epochs of 3 TRAIN + 2 EVAL steps; save_interval 2 (per mode): TRAIN 0, 2, 4, EVAL 0, 2
    saved = ["EVAL:0", "EVAL:2", "GLOBAL:0", "GLOBAL:2", "GLOBAL:3", "GLOBAL:6", "GLOBAL:8",
             "TRAIN:0", "TRAIN:2", "TRAIN:4"]
    train_only = ["GLOBAL:0", "GLOBAL:2", "GLOBAL:6", "TRAIN:0", "TRAIN:2", "TRAIN:4"]
    for name in ("layer1.0.relu_0_output_0", "layer1.0.relu_1_output_0", "relu_0_output_0",
                 "ResNet_layer1.0.conv1.weight", "ResNet_fc.bias", "layer1.0.bn1.running_mean_output_0",
                 "layer1.0.bn2.running_var_output_0", "CrossEntropyLoss_0_input_0", "CrossEntropyLoss_0_input_1"):
        assert got[name] == saved, name
    for name in ("gradient/layer1.0.relu_ReLU_output", "gradient/ResNet_layer1.0.conv1.weight",
                 "gradient/CrossEntropyLoss_CrossEntropyLoss_output"):
        assert got[name] == train_only, name
    # save_scalar: at the step during which it was called (before the first step: the first step)
    assert got["scalar/parameters"] == ["GLOBAL:0", "TRAIN:0"]
    assert got["scalar/loss"] == ["GLOBAL:2", "GLOBAL:7", "TRAIN:2", "TRAIN:5"]
    assert got["scalar/accuracy"] == ["EVAL:1", "EVAL:3", "GLOBAL:4", "GLOBAL:9"]
    tr = create_trial(trial)
    labels = tr.tensor("CrossEntropyLoss_0_input_1").value(2, mode="EVAL")
    assert labels.shape == (4,) and tr.tensor("CrossEntropyLoss_0_input_0").value(2, mode="EVAL").shape == (4, 5)


@pytest.mark.parametrize("key", ["late_1", "late"])
def test_hook_created_after_a_forward_takes_over(runs: Runs, key: str) -> None:
    """The zero-code hook attaches at the warm-up forwards and hands over to the script's hook: one
    step count for the job, nothing lost or overwritten, one collections file listing both."""
    case = SDLOCAL_ONLY[key]
    trial = runs(key, case)
    n = int(case.args[1])
    got = steps_of(dump_ours(trial))
    every = [f"GLOBAL:{s}" for s in range(n + 4)] + [f"TRAIN:{s}" for s in range(n + 4)]
    assert got["Sequential_0.weight"] == sorted(every)
    assert got["1_output_0"] == sorted(every)  # relu_output: the ReLU module's output
    assert got["CrossEntropyLoss_output_0"] == sorted(f"{m}:{s}" for m in ("GLOBAL", "TRAIN")
                                                      for s in range(n, n + 4))
    tr = create_trial(trial)
    assert tr.training_ended() and tr.steps() == list(range(n + 4))
    assert sorted(p.name for p in (trial / "index" / "000000000").iterdir()) == \
        [f"{s:012d}_worker_0.json" for s in range(n + 4)]
    assert tr.collection("relu_output").tensor_names == {"1_output_0"}


def test_script_without_hook_gets_the_zero_code_hook(runs: Runs) -> None:
    got = steps_of(dump_ours(runs("no_hook", NO_HOOK)))
    assert set(got) == {"Sequential_0.weight", "Sequential_2.weight", "gradient/Sequential_0.weight",
                        "gradient/Sequential_2.weight", "gradient/Sequential_0.bias", "gradient/Sequential_2.bias",
                        "1_output_0", "CrossEntropyLoss_output_0"}
    assert got["Sequential_0.weight"] == sorted(f"{m}:{s}" for m in ("GLOBAL", "TRAIN") for s in (0, 2, 4))


def test_readme_explicit_api_example_passes_every_time(runs: Runs, tmp_path: Path) -> None:
    """It used to race the zero-code hook on the same `.tmp` files and fail in most runs: now the
    zero-code hook stands down (run_ours checks that nobody else wrote to the folder)."""
    for trial in (runs("readme", README), run_ours(README, tmp_path)):
        tr = create_trial(trial)
        assert tr.training_ended() and tr.steps() == list(range(7))
        assert tr.tensor("scalar/accuracy").steps(mode="EVAL") == [0]
        assert not list(trial.rglob("*.tmp"))


def test_get_hook_without_a_config_is_none(tmp_path: Path) -> None:
    proc = run_hook_run("get_hook_script.py", tmp_path, None)
    assert proc.returncode == 0, proc.stderr
    assert "done without hook" in proc.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.interop
def test_smdebug_reads_what_sdlocal_only_scripts_save(runs: Runs, smdebug_python: Path) -> None:
    trials = [runs(key, case) for key, case in SDLOCAL_ONLY.items()]
    for trial, by_smdebug in zip(trials, dump_smdebug(smdebug_python, *trials), strict=True):
        assert_same_trial(by_smdebug, dump_ours(trial))
