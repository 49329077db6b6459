"""The recommended rule set from the real SageMaker Python SDK (v2): the documented
`Rule.sagemaker(base_config=...)` builds the DebugRuleConfigurations entry that sdlocal expands."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

from sdlocal.evaluator.recommended import RECOMMENDED
from sdlocal.launcher.spec.parse import spec_from_request

SDK_RULE = """
import json
from sagemaker.debugger import Rule
rule = Rule.sagemaker(base_config={
    "DebugRuleConfiguration": {"RuleConfigurationName": "RecommendedRules",
                               "RuleParameters": {"rule_to_invoke": "RecommendedRules"}},
    "CollectionConfigurations": []})
rule.image_uri = "503895931360.dkr.ecr.us-east-1.amazonaws.com/sagemaker-debugger-rules:latest"  # the estimator sets it
print(json.dumps(rule.to_debugger_rule_config_dict()))
"""


def test_the_sdk_rule_expands_into_the_set(sagemaker_python: Path, tmp_path: Path) -> None:
    done = subprocess.run([str(sagemaker_python), "-c", SDK_RULE], capture_output=True, text=True, timeout=120,
                          env={"SAGEMAKER_SUPPRESS_V2_WARNING": "1", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    entry = json.loads(done.stdout.strip().splitlines()[-1])
    (tmp_path / "train.py").write_text("print('hi')\n")
    spec = spec_from_request({"EntryPoint": "train.py", "DebugRuleConfigurations": [entry]}, base_dir=tmp_path,
                                check_rule_names=True)
    assert [r.name for r in spec.debug_rules] == [r.name for r in RECOMMENDED]
    assert {r.image for r in spec.debug_rules} == {entry["RuleEvaluatorImage"]}
