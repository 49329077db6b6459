"""benchmarks/gpu_hook.py runs end to end on CPU with tiny settings (no timing asserted: the
figures are its output), and its report computes floors, ratios and verdicts as documented."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.gpu_hook_floor import Floor
from benchmarks.gpu_hook_model import RESNET18_PARAMETERS, make_model, parameter_count
from benchmarks.gpu_hook_report import summarize

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_cpu_run_with_tiny_settings(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO_ROOT / "benchmarks" / "gpu_hook.py"), "--device", "cpu", "--steps", "3",
         "--warmup", "2", "--rounds", "1", "--batch", "2", "--probe-mib", "4", "--out-dir", str(tmp_path / "work"),
         "--results-dir", str(tmp_path / "results")],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    [path] = (tmp_path / "results").glob("gpu-hook-cpu-*.json")
    results = json.loads(path.read_text())
    assert results["markdown"] in proc.stdout
    by_config = {r["config"]: r for r in results["runs"]}
    assert sorted(by_config) == ["1", "10", "100", "none", "timeline"]
    assert [by_config[c]["saved_steps"] for c in ("1", "10", "100")] == [5, 1, 1]  # 5 steps: 0-4
    assert by_config["timeline"]["timeline_events"] >= 5
    params = results["parameters"]
    for c in ("1", "10", "100"):  # weights and gradients in float32, plus framing, names and the loss
        assert 8 * params < by_config[c]["bytes_per_saved_step"] < 8 * params + 65536
    assert all(len(run["step_ms"]) == 3 for run in results["runs"])
    assert list((tmp_path / "work").iterdir()) == []  # trials and probes removed
    assert results["floor"]["copy_gbps"] > 0 and results["floor"]["write_gbps"] > 0


def test_builtin_resnet18_has_torchvisions_parameter_count() -> None:
    assert parameter_count(make_model("resnet18-builtin").model) == RESNET18_PARAMETERS


def _run(config: str, rnd: int, step_ms: float, close_s: float = 0.0, nbytes: int = 0) -> dict:  # type: ignore[type-arg]
    run = {"config": config, "round": rnd, "step_ms": [step_ms] * 10, "close_s": close_s}
    if nbytes:
        run["bytes_per_saved_step"] = nbytes
    return run


def test_report_ratios_floors_and_verdicts() -> None:
    floor = Floor(copy_gbps=10.0, copy_kind="test", write_gbps=2.0, write_fsync_gbps=1.0, probe_bytes=1)
    runs = [_run("none", 0, 10.0), _run("none", 1, 20.0),
            _run("100", 0, 10.05, nbytes=100_000_000), _run("100", 1, 20.1, nbytes=100_000_000),
            # 100 MB a step: copy 10 ms, write 50 ms: floor 50 ms a step at interval 1
            _run("1", 0, 55.0, close_s=0.05, nbytes=100_000_000), _run("1", 1, 65.0, nbytes=100_000_000),
            _run("10", 0, 11.0, nbytes=100_000_000), _run("10", 1, 22.0, nbytes=100_000_000)]
    rows = {r["config"]: r for r in summarize(runs, floor, steps=10)}
    assert rows["100"]["ratio"] == pytest.approx(1.005) and rows["100"]["verdict"] == "PASS"
    assert rows["10"]["ratio"] == pytest.approx(1.1) and rows["10"]["verdict"] == "FAIL"
    one = rows["1"]
    assert one["copy_floor_ms"] == pytest.approx(10.0) and one["write_floor_ms"] == pytest.approx(50.0)
    assert one["floor_ms"] == pytest.approx(50.0)  # max(no hook's 15 ms median of means, 50 / 1)
    # round 0: (550 + 50) / 10 = 60 ms against 10 = x6; round 1: 65 / 20 = x3.25; median x4.625
    assert one["ratio"] == pytest.approx(4.625)
    assert one["target"] == pytest.approx(1.2 * 50.0 / 15.0)  # the floor allows more than x1.5 here
    assert one["verdict"] == "FAIL"
