"""The training records of an unchanged Hugging Face Trainer script under the real `sdlocal run`
(process runtime, the zero-code hook's Trainer callback): the Trainer calls `model(**batch)` in
steps its own loop starts, and the hook still fingerprints each batch, so RepeatedBatches judges
them: DataLoader workers repeating each other's random crops fire it, crops from a generator
PyTorch seeds per worker do not (tests/hook/scripts/hf_augment_workers.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.conftest import missing

pytestmark = pytest.mark.slow
SCRIPTS = Path(__file__).resolve().parent / "scripts"


@pytest.mark.parametrize(("case", "expected"), [("buggy", "IssuesFound"), ("fixed", "NoIssuesFound")])
def test_trainer_batches_are_judged(case: str, expected: str, tmp_path: Path, moto_server: str) -> None:
    import importlib.util

    if importlib.util.find_spec("transformers") is None:
        missing("transformers is not installed (pip install '.[hf]')")
    env = {**os.environ, "SDLOCAL_HOME": str(tmp_path / "home")}
    env.pop("AWS_ENDPOINT_URL_S3", None)
    proc = subprocess.run(
        [sys.executable, "-m", "sdlocal", "run", "--entry-point", "hf_augment_workers.py", "--source-dir",
         str(SCRIPTS), "--job-name", f"hf-crops-{case}-{uuid.uuid4().hex[:6]}", "-p", f"case={case}",
         "--hook-param", "save_interval=1", "--rule", "RepeatedBatches", "--runtime", "process",
         "--poll-interval", "0.5", "--s3-endpoint-url", moto_server, "--json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    [row] = json.loads(proc.stdout)
    assert row["RuleEvaluationStatus"] == expected, (row, proc.stderr[-3000:])
