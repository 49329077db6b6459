"""benchmarks/framework_timeline.py runs end to end in quick mode, and its check of the trace files
rejects a trace that misses steps (no timing is asserted: timings are the harness's output)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.errors import BenchmarkError
from benchmarks.framework_timeline import verify
from sdlocal.trial.profiler import TraceWriter

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_quick_run(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "benchmarks" / "framework_timeline.py"), "--quick",
                           "--models", "mlp", "--results-dir", str(tmp_path)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=540)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    [result_file] = tmp_path.glob("timeline-*.json")
    results = json.loads(result_file.read_text())
    assert sorted(results["in_process"]) == ["mlp+hook", "mlp+nohook"]
    assert all(r["cpu_off_ms"] > 0 and r["pairs"] == 6 for r in results["in_process"].values())
    assert sorted(results["summary"]) == ["mlp/default", "mlp/framework-profile", "mlp/off"]
    runs = results["runs"]
    assert len(runs) == 2 * 3
    total = results["settings"]["warmup"] + results["settings"]["steps"]
    for r in runs:  # verified by the harness: 3 events per step (+ data loading, + step 5's operators)
        assert (r["events"] == 0) if r["variant"] == "off" else (r["events"] >= 3 * total)
    assert "| mlp/default |" in proc.stdout


def test_verify_rejects_a_trace_that_misses_a_step(tmp_path: Path) -> None:
    w = TraceWriter(tmp_path, "1-algo-1", suffix="pythontimeline.json")
    t = w.start_time_us
    for step in (0, 1, 3):  # step 2 is missing
        for phase, name in (("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN"), ("Forward", "Net"),
                            ("Backward(post-forward)", "Net")):
            w.record(phase, name, t + step * 100, t + step * 100 + 50, {"step_num": step})
    w.close()
    with pytest.raises(BenchmarkError, match="unexpected trace"):
        verify("default", tmp_path, 4)
    with pytest.raises(BenchmarkError, match="unexpected trace"):
        verify("default", tmp_path, 3)  # steps 0, 1, 3 are not 0..2 either


def test_verify_accepts_a_complete_trace(tmp_path: Path) -> None:
    w = TraceWriter(tmp_path, "1-algo-1", suffix="pythontimeline.json")
    t = w.start_time_us
    for step in range(3):
        for phase, name in (("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN"), ("Forward", "Net"),
                            ("Backward(post-forward)", "Net")):
            w.record(phase, name, t + step * 100, t + step * 100 + 50, {"step_num": step})
    w.close()
    assert verify("default", tmp_path, 3) == 9
    with pytest.raises(BenchmarkError):
        verify("framework-profile", tmp_path, 3)  # its one data-loading batch is missing
