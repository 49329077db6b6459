"""End to end (process runtime): a job whose code directory has a requirements.txt gets it installed
before its entry point, into the job's own environment (the script imports the package; the hook
and its rule still work there; torch, already installed, is not installed again); the Python
running sdlocal does not get it. A requirements.txt that pip cannot install fails the training
with a FailureReason naming requirements.txt."""
from __future__ import annotations

import json
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.hook.test_requirements import make_wheel, not_in_this_python
from tests.launcher.e2e.test_e2e import sdlocal

pytestmark = pytest.mark.slow

TRAIN = textwrap.dedent("""
    import sdlocal_tinypkg
    import torch
    from torch import nn

    print("tinypkg says", sdlocal_tinypkg.VALUE, "from", sdlocal_tinypkg.__file__)
    torch.manual_seed(0)
    model, loss_fn = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)), nn.MSELoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(64, 4)
    y = x.sum(dim=1, keepdim=True)
    for step in range(30):
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("final loss", float(loss))
""")


def requirements_job(tmp_path: Path, name: str, requirements: str) -> Path:
    """A job spec whose code folder (tmp_path/code-<name>) holds train.py and this requirements.txt."""
    code = tmp_path / f"code-{name}"
    code.mkdir(exist_ok=True)
    (code / "train.py").write_text(TRAIN)
    (code / "requirements.txt").write_text(requirements)
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(yaml.safe_dump({
        "TrainingJobName": name, "EntryPoint": "train.py", "SourceDir": str(code),
        "DebugHookConfig": {"HookParameters": {"save_interval": "2"}},
        "DebugRuleConfigurations": [{"RuleConfigurationName": "LossNotDecreasing",
                                     "RuleParameters": {"rule_to_invoke": "LossNotDecreasing", "num_steps": "4"}}],
    }))
    return spec


def test_requirements_txt_installed_into_the_jobs_environment(tmp_path: Path, moto_server: str,
                                                              s3_client: Any) -> None:
    wheels = tmp_path / "wheels"
    make_wheel(wheels, value="from the wheel")
    tag = uuid.uuid4().hex[:6]
    good, bad = f"req-ok-{tag}", f"req-bad-{tag}"
    procs = {
        good: sdlocal(["run", str(requirements_job(tmp_path, good, f"--no-index\n--find-links {wheels}\n"
                                                     "sdlocal-tinypkg==1.0\ntorch\n")), "--runtime", "process"],
                      tmp_path, moto_server),
        bad: sdlocal(["run", str(requirements_job(tmp_path, bad, "--no-index\nsdlocal-no-such-package==1.0\n")),
                      "--runtime", "process"], tmp_path, moto_server),
    }
    results = {job: p.communicate(timeout=400) for job, p in procs.items()}

    out, err = results[good]
    assert procs[good].returncode == 0, err[-4000:]
    log = (tmp_path / "jobs" / good / "logs" / "training.log").read_text()
    assert "-m pip install -r requirements.txt" in log and "Requirement already satisfied: torch" in log
    assert "Successfully installed sdlocal-tinypkg-1.0" in log
    env = tmp_path / "jobs" / good / "requirements-env"
    assert f"tinypkg says from the wheel from {env}" in log, log[-3000:]
    assert log.index("Successfully installed") < log.index("tinypkg says")
    # the hook ran in the job's environment: the rule judged its losses
    assert {s["RuleConfigurationName"]: s["RuleEvaluationStatus"] for s in json.loads(out)} == {
        "LossNotDecreasing": "NoIssuesFound"}
    steps = s3_client.list_objects_v2(Bucket="sdlocal", Prefix=f"jobs/{good}/debug-output/index/").get("KeyCount")
    assert steps and steps >= 10

    _out, err = results[bad]
    assert procs[bad].returncode == 1, err[-4000:]
    assert "FailureReason: AlgorithmError: InstallRequirementsError:" in err, err[-4000:]
    assert "sdlocal-no-such-package" in err and "requirements.txt" in err
    assert "tinypkg says" not in (tmp_path / "jobs" / bad / "logs" / "training.log").read_text()
    not_in_this_python()
