"""Framework metrics end to end: unmodified training scripts with real DataLoaders under
`python -m sdlocal.hook.run` with a profilerconfig.json, the trace files read back by our ProfilerReader
and by the real smdebug 1.0.34 (side virtualenv)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from sdlocal.trial import create_trial
from sdlocal.trial.modes import ModeKeys
from sdlocal.trial.profiler import ProfilerReader, TraceEvent

REPO = Path(__file__).resolve().parents[2]
LOADER_TRAIN = REPO / "tests" / "hook" / "scripts" / "loader_train.py"
EXAMPLE_TRAIN = REPO / "examples" / "train.py"

pytestmark = pytest.mark.slow

# Run by the side virtualenv's python: every event smdebug's framework reader finds, and the step
# events get_events_by_step returns for a step interval.
SMDEBUG_READ = r'''
import json, sys, time
from smdebug.profiler.algorithm_metrics_reader import LocalAlgorithmMetricsReader

def rows(events):  # (smdebug turns the file's node "<pid>-algo-1" into "algo-1-<pid>": left out)
    return sorted(([e.event_phase, e.event_name, e.start_time, e.end_time, e.event_args or {}] for e in events),
                  key=json.dumps)

reader = LocalAlgorithmMetricsReader(sys.argv[1])
reader.refresh_event_file_list()
everything = rows(reader.get_events(0, int(time.time() * 1e6) + 10**9))
by_step = rows(reader.get_events_by_step(int(sys.argv[2]), int(sys.argv[3])))
print(json.dumps({"events": everything, "by_step": by_step}))
'''


def _run(tmp_path: Path, script: Path, params: dict[str, Any] | None, *args: str,
         hook_config: dict[str, Any] | None = None, disable: bool = False) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "SM_CURRENT_HOST": "algo-1"}
    env["SMPROFILER_CONFIG_PATH"] = str(tmp_path / "profilerconfig.json")
    env["SMDEBUG_CONFIG_FILE_PATH"] = str(tmp_path / "debughookconfig.json")
    if params is not None:
        (tmp_path / "profilerconfig.json").write_text(
            json.dumps({"ProfilingParameters": params, "DisableProfiler": disable}))
    if hook_config is not None:
        (tmp_path / "debughookconfig.json").write_text(json.dumps(hook_config))
    return subprocess.run([sys.executable, "-m", "sdlocal.hook.run", str(script), *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)


def _params(tmp_path: Path, **extra: str) -> dict[str, str]:
    # As sdlocal writes it: the sampling interval, plus what the request's ProfilingParameters hold.
    return {"ProfilingIntervalInMilliseconds": "500", "LocalPath": str(tmp_path / "profiler"), **extra}


def _read(tmp_path: Path) -> ProfilerReader:
    root = tmp_path / "profiler"
    assert root.is_dir()
    assert not list(root.rglob("*.tmp")), "a trace file was left open"
    reader = ProfilerReader(root)
    reader.refresh()
    assert reader.damage == [] and reader.partial_lines == 0
    return reader


def _smdebug_read(smdebug_python: Path, root: Path, start_step: int, end_step: int) -> dict[str, Any]:
    proc = subprocess.run([str(smdebug_python), "-c", SMDEBUG_READ, str(root), str(start_step), str(end_step)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _rows(events: list[TraceEvent]) -> list[list[Any]]:
    return sorted(([e.phase, e.name, e.start_us, e.end_us, e.args or {}] for e in events), key=json.dumps)


@pytest.mark.parametrize("workers", [0, 2])
def test_unmodified_script_with_a_dataloader(tmp_path: Path, workers: int, smdebug_python: Path) -> None:
    # The SDK's way of writing a metrics config: a dict literal with a trailing comma.
    params = _params(tmp_path, DataloaderProfilingConfig='{"StartStep": 0, "NumSteps": 3, "MetricsRegex": ".*", }',
                     DetailedProfilingConfig='{"StartStep": 5, "NumSteps": 1, }')
    proc = _run(tmp_path, LOADER_TRAIN, params, "--epochs", "2", "--eval", "--num-workers", str(workers))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1]) == {"train_steps": 16, "eval_steps": 4}
    fw = _read(tmp_path).framework
    train, ev = fw.steps(mode="TRAIN"), fw.steps(mode="EVAL")
    assert train.step.tolist() == list(range(16)) and ev.step.tolist() == list(range(4))
    assert len(fw.events(phase="Forward")) == 20 and len(fw.events(phase="Backward(post-forward)")) == 16
    nodes = {e.node for e in fw.events()}
    assert len(nodes) == 1 and nodes.pop().endswith("-algo-1")

    # Data loading: the first iterator's creation and the batches of global steps 0, 1, 2.
    it = "_MultiProcessingDataLoaderIter" if workers else "_SingleProcessDataLoaderIter"
    args = {"num_workers": workers, "pin_memory": False}
    (init,) = fw.events(phase="DataLoaderIterInitialize")
    assert (init.name, init.args) == (f"{it}.__init__", args)
    nexts = fw.events(phase="DataLoaderIter")
    assert [(e.name, e.args) for e in nexts] == [(f"{it}::GetNext", args)] * 3
    starts, ends = train.start_us.tolist(), train.end_us.tolist()
    assert init.end_us <= nexts[0].start_us and nexts[0].end_us <= starts[0]
    for step, e in enumerate(nexts[1:], start=1):
        assert ends[step - 1] <= e.start_us <= e.end_us <= starts[step]
    worker_events = fw.events(phase="DataLoaderWorker")
    assert len(worker_events) == workers  # the workers of the first epoch's loader (its batches were recorded)
    if workers:
        assert sorted((e.args or {})["worker_id"] for e in worker_events) == [0, 1]
        pids = {(e.args or {})["pid"] for e in worker_events}
        assert len(pids) == 2 and all(isinstance(p, int) and p > 0 for p in pids)
        for w in worker_events:
            assert w.start_us == init.start_us and w.end_us >= ends[7]  # alive for the whole first epoch

    # Detailed profiling: torch's operators of step 5 (and what runs before step 6 starts).
    ops = fw.events(phase="cpu_functions")
    assert "aten::addmm" in {e.name for e in ops} and {(e.args or {})["step_num"] for e in ops} == {5}
    assert all(starts[5] <= e.start_us < starts[6] for e in ops)

    # The real smdebug reads the same events, and finds steps 2 and 3 by step number.
    got = _smdebug_read(smdebug_python, tmp_path / "profiler", 2, 4)
    assert got["events"] == _rows(fw.events())
    step_events = [(r[0], r[4]["step_num"]) for r in got["by_step"] if r[0].startswith("Step:")]
    assert step_events == [("Step:ModeKeys.TRAIN", 2), ("Step:ModeKeys.TRAIN", 3)]


def test_the_scripts_own_hook_and_modes(tmp_path: Path, smdebug_python: Path) -> None:
    proc = _run(tmp_path, LOADER_TRAIN, _params(tmp_path), "--epochs", "2", "--eval", "--own-hook",
                "--out-dir", str(tmp_path / "tensors"))
    assert proc.returncode == 0, proc.stderr
    fw = _read(tmp_path).framework
    assert fw.steps(mode="TRAIN").step.tolist() == list(range(16))
    assert fw.steps(mode="EVAL").step.tolist() == list(range(4))  # set_mode(EVAL), as smdebug's examples do
    assert fw.events(phase="DataLoaderIter") == []  # no DataloaderProfilingConfig: no data-loading events
    got = _smdebug_read(smdebug_python, tmp_path / "profiler", 0, 1)
    assert got["events"] == _rows(fw.events())


def test_with_a_hook_config_the_timeline_follows_the_trials_steps(tmp_path: Path) -> None:
    hook_config = {"LocalPath": str(tmp_path / "tensors"), "HookParameters": {"save_interval": "1"},
                   "CollectionConfigurations": [{"CollectionName": "losses"}]}
    proc = _run(tmp_path, EXAMPLE_TRAIN, _params(tmp_path), "--steps", "9", "--eval-every", "3",
                "--eval-batches", "2", "--log-every", "0", hook_config=hook_config)
    assert proc.returncode == 0, proc.stderr
    trial = create_trial(tmp_path / "tensors")
    fw = _read(tmp_path).framework
    for mode in (ModeKeys.TRAIN, ModeKeys.EVAL):
        assert fw.steps(mode=mode).step.tolist() == trial.steps(mode=mode)
    assert len(fw.steps()) == len(trial.steps()) == 15


def test_a_crash_still_closes_the_trace_files(tmp_path: Path) -> None:
    proc = _run(tmp_path, LOADER_TRAIN, _params(tmp_path), "--epochs", "2", "--fail-at-step", "5")
    assert proc.returncode != 0 and "failing on purpose at step 5" in proc.stderr
    fw = _read(tmp_path).framework  # no .tmp left: every file has its final name
    assert fw.steps(mode="TRAIN").step.tolist() == list(range(5))


def test_files_rotate_by_interval(tmp_path: Path, smdebug_python: Path) -> None:
    params = _params(tmp_path, RotateFileCloseIntervalInSeconds="0.2", RotateMaxFileSizeInBytes="1000000")
    proc = _run(tmp_path, LOADER_TRAIN, params, "--epochs", "2", "--step-sleep-ms", "80")
    assert proc.returncode == 0, proc.stderr
    files = sorted((tmp_path / "profiler" / "framework" / "pevents").rglob("*_pythontimeline.json"))
    assert len(files) >= 2
    fw = _read(tmp_path).framework
    assert fw.steps(mode="TRAIN").step.tolist() == list(range(16))
    got = _smdebug_read(smdebug_python, tmp_path / "profiler", 0, 1)
    assert got["events"] == _rows(fw.events())


def test_dataloader_time_range(tmp_path: Path) -> None:
    # The SDK's TimeRange without a start: from the first data-loading check, for 1 s.
    params = _params(tmp_path, DataloaderProfilingConfig='{"Duration": 1, }')
    before = time.time()
    proc = _run(tmp_path, LOADER_TRAIN, params, "--epochs", "2", "--step-sleep-ms", "150")
    assert proc.returncode == 0, proc.stderr
    fw = _read(tmp_path).framework
    assert len(fw.steps(mode="TRAIN")) == 16
    (init,) = fw.events(phase="DataLoaderIterInitialize")  # the first check: creating the first iterator
    assert init.start_us >= before * 1e6
    nexts = fw.events(phase="DataLoaderIter")
    assert 1 <= len(nexts) < 16  # steps take >= 150 ms: at most 7 of the 16 batches fall in 1 s
    assert all(e.start_us < init.end_us + 1_000_000 + 10_000 for e in nexts)  # checked just before each start


def test_disabled_or_absent_profiler_config_writes_nothing(tmp_path: Path) -> None:
    proc = _run(tmp_path, LOADER_TRAIN, _params(tmp_path), "--epochs", "1", disable=True)
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "profiler").exists()
    (tmp_path / "profilerconfig.json").unlink()
    proc = _run(tmp_path, LOADER_TRAIN, None, "--epochs", "1")
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "profiler").exists()


def test_a_bad_profiler_config_fails_before_training(tmp_path: Path) -> None:
    params = _params(tmp_path, DataloaderProfilingConfig='{"StartStep": "soon"}')
    proc = _run(tmp_path, LOADER_TRAIN, params, "--epochs", "1")
    assert proc.returncode == 2 and proc.stdout == ""
    path = tmp_path / "profilerconfig.json"
    assert proc.stderr.strip().splitlines() == [
        f"sdlocal.hook.run: bad profiler config {path}: ProfilingParameters.DataloaderProfilingConfig.StartStep: "
        "expected an integer, got 'soon'"]
