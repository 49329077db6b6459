"""A custom rule written against smdebug's modules (`smdebug.modes`, `smdebug.core.modes`,
`smdebug.exceptions`, `smdebug.profiler.utils`, `smdebug.rules.rule`, `smdebug.trials`) runs
unchanged in the evaluator container, with the same verdicts as under the process runtime."""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.docker.test_runtime import finish, leftovers, sdlocal, verdicts

pytestmark = pytest.mark.docker

RULE = '''from smdebug import modes
from smdebug.core.modes import ModeKeys
from smdebug.exceptions import TensorUnavailableForStep
from smdebug.profiler.utils import str2bool
from smdebug.rules.rule import Rule
from smdebug.trials import create_trial  # imported as rule files do; unused


class LossBelow(Rule):
    """Fires at the first TRAIN step whose loss is below `threshold`, when `fire` is true."""

    def __init__(self, base_trial, threshold="100.0", fire="true"):
        super().__init__(base_trial, action_str="")
        self.threshold = float(threshold)
        self.fire = str2bool(fire)

    def invoke_at_step(self, step):
        if self.base_trial.mode(step) not in (modes.TRAIN, ModeKeys.GLOBAL):
            return False
        for name in self.base_trial.tensor_names(collection="losses"):
            try:
                value = float(self.base_trial.tensor(name).value(step))
            except TensorUnavailableForStep:
                continue
            if self.fire and value < self.threshold:
                return True
        return False


class LossBelowQuiet(LossBelow):
    def __init__(self, base_trial, threshold="100.0", fire="false"):
        super().__init__(base_trial, threshold=threshold, fire=fire)
'''


def test_smdebug_style_rule_in_the_evaluator_container(docker_client: Any, sdlocal_images: Any, moto_server: str,
                                                       tmp_path: Path) -> None:
    rule = tmp_path / "loss_below.py"
    rule.write_text(RULE)
    results = {}
    for runtime in ("docker", "process"):
        job = f"smd-{runtime[:2]}-{uuid.uuid4().hex[:6]}"
        args = ["run", "examples/job.yaml", "--job-name", job, "-p", "steps=12",
                "--custom-rule", f"{rule}:LossBelow",
                "--custom-rule", f"{rule}:LossBelowQuiet"]
        code, rows, err = finish(sdlocal(args, tmp_path, moto_server, runtime=runtime))
        assert code == 0, err
        assert runtime == "process" or "Runtime: docker" in err
        results[runtime] = verdicts(rows)
        if runtime == "docker":
            assert leftovers(docker_client, job) == []
    assert results["docker"] == results["process"], results
    custom = {k: v for k, v in results["docker"].items() if k.startswith("LossBelow")}
    assert sorted(custom.values()) == ["IssuesFound", "NoIssuesFound"], results
