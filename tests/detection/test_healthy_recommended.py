"""The recommended rule set raises no alarm on healthy pipelines of the common kinds: each script of
detection/healthy/ (CNN classifier, LSTM and Transformer language models, VAE, GAN, regression,
a Hugging Face Trainer fine-tune) runs through the real `sdlocal run --recommended-rules` (process runtime, every step saved) and
every rule of the set ends NoIssuesFound."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from sdlocal.evaluator.recommended import RECOMMENDED

HEALTHY = Path(__file__).resolve().parents[2] / "detection" / "healthy"
SCRIPTS = sorted(p.stem for p in HEALTHY.glob("*.py") if not p.name.startswith("_"))
pytestmark = pytest.mark.slow
LAYER_RULES = {"DeadRelu", "SaturatedActivation", "CheckInputImages"}
EXPECTED_LAYERS = {  # the rules of LAYER_RULES whose layers (or image inputs) each model has
    "cnn_classifier": {"DeadRelu", "CheckInputImages"}, "gan": {"DeadRelu", "SaturatedActivation", "CheckInputImages"},
    "hf_finetune": {"SaturatedActivation"},  # BERT's pooler ends in tanh; its feed-forward layers use GELU
    "lstm_lm": set(), "regression": {"SaturatedActivation"}, "transformer_lm": set(), "vae": {"DeadRelu"},
}


def test_the_healthy_scripts_are_the_common_kinds() -> None:
    assert SCRIPTS == ["cnn_classifier", "gan", "hf_finetune", "lstm_lm", "regression", "transformer_lm", "vae"]


@pytest.mark.parametrize("script", SCRIPTS)
def test_recommended_rules_find_no_issue(script: str, tmp_path: Path, moto_server: str) -> None:
    job = f"healthy-{script.replace('_', '-')}-{uuid.uuid4().hex[:6]}"
    env = {**os.environ, "SDLOCAL_HOME": str(tmp_path / "home")}
    env.pop("AWS_ENDPOINT_URL_S3", None)
    proc = subprocess.run(
        [sys.executable, "-m", "sdlocal", "run", "--entry-point", f"{script}.py", "--source-dir", str(HEALTHY),
         "--job-name", job, "-p", "steps=40", "-p", "eval-every=10", "--hook-param", "save_interval=1",
         "--recommended-rules", "--runtime", "process", "--poll-interval", "0.5",
         "--s3-endpoint-url", moto_server, "--json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {s["RuleConfigurationName"]: s for s in json.loads(proc.stdout)}
    assert set(rows) == {r.name for r in RECOMMENDED}
    for name, row in rows.items():
        # no alarm; a rule watching a kind of layer this model lacks judged nothing and says so
        if name in LAYER_RULES and row["RuleEvaluationStatus"] == "Error":
            assert f"Rule {name} judged nothing: no tensor of collection" in row["StatusDetails"], row
            continue
        assert row["RuleEvaluationStatus"] == "NoIssuesFound", (name, row, proc.stderr[-3000:])
    judged = {n for n, row in rows.items() if row["RuleEvaluationStatus"] == "NoIssuesFound"}
    assert judged >= {r.name for r in RECOMMENDED} - LAYER_RULES
    assert judged & LAYER_RULES == EXPECTED_LAYERS[script]  # the layers each model has are judged
