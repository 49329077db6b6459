"""benchmarks/hf_trainer.py runs end to end in quick mode: hook off / save_interval 10 / 100 on a
tiny BERT under the Trainer, every hooked trial checked by the script (its due TRAIN steps hold
the loss and the gradients; it fails otherwise). No timing is asserted."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import missing

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_quick_run() -> None:
    if importlib.util.find_spec("transformers") is None:
        missing("transformers is not installed (pip install '.[hf]')")
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "benchmarks" / "hf_trainer.py"), "--quick"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=500)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(results["ratio"]) == {"10", "100"} and results["rounds"] == 1
    assert all(len(r) == 1 and r[0] > 0 for r in results["ratios"].values())
    assert "| save_interval 10 |" in proc.stdout
