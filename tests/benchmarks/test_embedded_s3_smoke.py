"""benchmarks/embedded_s3.py runs end to end in quick mode: both servers measured at both stored
sizes, every GET compared and every LIST complete (the script fails otherwise). No timing is asserted."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_quick_run(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "benchmarks" / "embedded_s3.py"), "--quick",
                           "--dir", str(tmp_path / "data")], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [r["objects"] for r in rows][0] == 0 and rows[1]["objects"] > 0 and rows[1]["stored_gb"] >= 0.02
    for row in rows:
        assert row["put_ratio"] > 0 and row["get_ratio"] > 0
        assert 0 < row["disk"]["rss_mib"] < 300 and row["disk"]["start_s"] > 0
    assert "| PUT ratio | GET ratio |" in proc.stdout
    assert (tmp_path / "data" / "index.sqlite").is_file()  # a folder given is kept
