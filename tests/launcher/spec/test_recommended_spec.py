"""The recommended rule set in a job spec: one DebugRuleConfigurations entry (or `sdlocal run
--recommended-rules`) becomes one entry per rule of evaluator/recommended.py."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sdlocal.evaluator.recommended import NAME, RECOMMENDED
from sdlocal.launcher.errors import SpecError
from sdlocal.launcher.spec.model import JobSpec
from sdlocal.launcher.spec.overrides import Overrides, RuleFlag
from sdlocal.launcher.spec.parse import spec_from_request


@pytest.fixture
def src(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text("print('hi')\n")
    return tmp_path


def parse(req: dict[str, Any], src: Path) -> JobSpec:
    return spec_from_request({"EntryPoint": "train.py", **req}, base_dir=src, check_rule_names=True)


def test_the_set_expands_into_its_rules_with_their_collections(src: Path) -> None:
    spec = parse({"DebugRuleConfigurations": [{"RuleConfigurationName": NAME}]}, src)
    assert [r.name for r in spec.debug_rules] == [r.name for r in RECOMMENDED]
    assert [dict(r.parameters) for r in spec.debug_rules] == [{"rule_to_invoke": r.name, **r.parameters} for r in RECOMMENDED]
    assert all(r.output.endswith(f"/rule-output/{r.name}") for r in spec.debug_rules)
    assert spec.hook is not None
    collections = {c.name for c in spec.hook.collections}
    assert {"gradients", "relu_output", "tanh_input", "input_image"} <= collections  # the rules' defaults


def test_the_sdk_shape_and_a_rule_configured_in_its_own_entry(src: Path) -> None:
    """Rule.sagemaker(base_config=...) sends rule_to_invoke; a rule of the set the request also
    configures keeps the request's entry (and its parameters)."""
    image = "503895931360.dkr.ecr.us-east-1.amazonaws.com/sagemaker-debugger-rules:latest"
    spec = parse({"DebugRuleConfigurations": [
        {"RuleConfigurationName": "MySet", "RuleEvaluatorImage": image, "RuleParameters": {"rule_to_invoke": NAME}},
        {"RuleConfigurationName": "VanishingGradient", "RuleParameters": {"threshold": "1e-5"}},
    ]}, src)
    names = [r.name for r in spec.debug_rules]
    assert names.count("VanishingGradient") == 1 and "MySet" not in names
    assert dict(spec.debug_rules[0].parameters) == {"rule_to_invoke": "VanishingGradient", "threshold": "1e-5"}
    assert {r.image for r in spec.debug_rules[1:]} == {image}
    assert len(spec.debug_rules) == len(RECOMMENDED)


def test_the_flag_adds_the_entry(src: Path) -> None:
    request = Overrides(entry_point="train.py", rules=(RuleFlag("ExplodingTensor", (("only_nan", "True"),)), RuleFlag(NAME))).apply({})
    spec = spec_from_request(request, base_dir=src, check_rule_names=True)
    assert spec.debug_rules[0].parameters["only_nan"] == "True"
    assert sorted(r.name for r in spec.debug_rules) == sorted(r.name for r in RECOMMENDED)


@pytest.mark.parametrize(("rules", "field", "message"), [
    ([{"RuleConfigurationName": NAME, "RuleParameters": {"threshold": "1"}}], "DebugRuleConfigurations[0].RuleParameters",
     "takes no parameters (got threshold)"),
    ([{"RuleConfigurationName": NAME}] + [{"RuleConfigurationName": f"R{i}", "RuleParameters": {"rule_to_invoke": "ExplodingTensor"}}
                                          for i in range(15)], "DebugRuleConfigurations", "with the RecommendedRules set; the maximum is 20"),
])
def test_refused(src: Path, rules: list[dict[str, Any]], field: str, message: str) -> None:
    with pytest.raises(SpecError) as info:
        parse({"DebugRuleConfigurations": rules}, src)
    assert info.value.field == field and message in str(info.value)
