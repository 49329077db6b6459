"""benchmarks/profiler_latency.py runs end to end in quick mode: every scenario fires on its fault
and not before it (the script fails otherwise). No timing is asserted."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_quick_run() -> None:
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "benchmarks" / "profiler_latency.py"), "--quick"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(results) == {"LowGPUUtilization", "ProfilerReport", "StepOutlier"}
    assert all(len(r["latency_s"]) == 1 and r["latency_s"][0] > 0 for r in results.values())
