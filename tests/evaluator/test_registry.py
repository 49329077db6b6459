from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from sdlocal.evaluator.errors import CustomRuleError, RuleParameterError, UnknownRuleError
from sdlocal.evaluator.registry import builtin_rule_infos, get_rule_class, instantiate_rule, load_custom_rule
from sdlocal.evaluator.rule import Rule, Verdict
from sdlocal.evaluator.rules import VanishingGradient
from sdlocal.trial import create_trial
from sdlocal.trial.smdebug_shim import compat_dir
from tests.evaluator._trials import make_trial, train_steps

SMDEBUG_STYLE_RULE = '''
from smdebug.rules.rule import Rule
from smdebug.exceptions import TensorUnavailableForStep


class CustomGradientRule(Rule):
    def __init__(self, base_trial, threshold="10.0"):
        super().__init__(base_trial)  # the old signature, no action_str
        self.threshold = float(threshold)

    def set_required_tensors(self, step):
        for tname in self.base_trial.tensor_names(collection="gradients"):
            self.req_tensors.add(tname, steps=[step])

    def invoke_at_step(self, step):
        for t in self.req_tensors.get():
            if abs(t.reduction_value(step, "mean", abs=True)) > self.threshold:
                return True
        return False
'''


def test_get_rule_class_and_suggestions() -> None:
    assert get_rule_class("VanishingGradient") is VanishingGradient
    with pytest.raises(UnknownRuleError) as info:
        get_rule_class("VanishingGradiant")
    assert str(info.value) == "Unknown rule 'VanishingGradiant'. Did you mean: VanishingGradient?"
    with pytest.raises(UnknownRuleError, match="Did you mean: AllZero"):
        get_rule_class("allzero")
    with pytest.raises(UnknownRuleError, match="sdlocal rules"):
        get_rule_class("Xyzzy")


def test_builtin_rule_infos() -> None:
    infos = {i.name: i for i in builtin_rule_infos()}
    # rules.md's Debugger rules in rules.md's groups
    groups = {
        "universal": {"AllZero", "ClassImbalance", "Confusion", "LossNotDecreasing", "Overfit", "Overtraining",
                      "SimilarAcrossRuns", "StalledTrainingRule", "UnchangedTensor"},
        "deep learning": {"DeadRelu", "ExplodingTensor", "PoorWeightInitialization", "SaturatedActivation",
                          "TensorVariance", "VanishingGradient", "WeightUpdateRatio"},
        "DL applications": {"CheckInputImages", "NLPSequenceRatio"},
        "XGBoost": {"CreateXgboostReport", "FeatureImportanceOverweight", "TreeDepth"},
        # sdlocal's own Debugger rules (docs/rules-beyond-debugger.md), before the profiler rules
        "beyond Debugger": {"EvaluationMisuse", "FrozenParametersChanged", "GradientsNotReset",
                            "ParametersNotTraining", "RepeatedBatches", "ReplicaDivergence"},
        "profiler": {"BatchSize", "CPUBottleneck", "Dataloader", "GPUMemoryIncrease", "IOBottleneck",
                     "LoadBalancing", "LowGPUUtilization", "MaxInitializationTime", "OverallSystemUsage",
                     "OverallFrameworkMetrics", "StepOutlier", "ProfilerReport"},
    }
    assert set(infos) == set().union(*groups.values())
    assert {n for n, i in infos.items() if i.kind == "profiler"} == groups["profiler"]
    # listed by group (rules.md's order), then by name
    listed = [(i.group, i.name) for i in builtin_rule_infos()]
    assert [g for g, _ in listed] == sorted((g for g, _ in listed), key=list(groups).index)
    assert dict(infos["StepOutlier"].parameters) == {"stddev": "3", "mode": "None", "n_outliers": "10",
                                                     "scan_interval_us": "60000000"}
    assert "<Rule>_<parameter>" in dict(infos["ProfilerReport"].parameters)
    assert {name: info.group for name, info in infos.items()} == {
        name: group for group, names in groups.items() for name in names
    }
    assert infos["VanishingGradient"].parameters == (("threshold", "1e-07"),)
    assert dict(infos["LossNotDecreasing"].parameters)["num_steps"] == "10"
    assert all(i.description and "\n" not in i.description for i in infos.values())


def test_instantiate_rejects_unknown_parameter(tmp_path: Path) -> None:
    trial = make_trial(tmp_path, train_steps([{"gradient/a": np.ones(2)}]))
    with pytest.raises(RuleParameterError) as info:
        instantiate_rule(VanishingGradient, trial, {"treshold": "1"})
    assert info.value.parameter == "treshold" and "known: threshold" in str(info.value)
    rule = instantiate_rule(VanishingGradient, trial, {"threshold": "0.5"}, action_str='[{"name": "email"}]')
    assert rule.threshold == 0.5 and rule.action_str == '[{"name": "email"}]'


def test_smdebug_style_custom_rule_loads_and_runs(tmp_path: Path) -> None:
    path = tmp_path / "my_rule.py"
    path.write_text(SMDEBUG_STYLE_RULE)
    cls = load_custom_rule(path, "CustomGradientRule")
    assert issubclass(cls, Rule)
    # from now on `smdebug` in this process is sdlocal's package (imports the rule makes later too)
    assert sys.modules["smdebug"].SDLOCAL and Path(sys.modules["smdebug"].__file__).parent.parent == compat_dir()
    trial = make_trial(tmp_path / "t", train_steps([{"gradient/a": np.full(2, 1.0)}, {"gradient/a": np.full(2, 50.0)}]))
    rule = instantiate_rule(cls, trial, {"threshold": "20"}, action_str="[]")  # old signature: no action_str
    assert [rule.judge_step(0), rule.judge_step(1)] == [Verdict.CONDITION_NOT_MET, Verdict.CONDITION_MET]


def test_custom_rule_with_missing_tensor_is_not_evaluated(tmp_path: Path) -> None:
    path = tmp_path / "r.py"
    path.write_text(
        "from smdebug.rules.rule import Rule\n"
        "class NeedsX(Rule):\n"
        "    def __init__(self, base_trial, action_str=''):\n"
        "        super().__init__(base_trial, action_str=action_str)\n"
        "    def set_required_tensors(self, step):\n"
        "        self.req_tensors.add('x', steps=[step])\n"
        "    def invoke_at_step(self, step):\n"
        "        return True\n"
    )
    trial = make_trial(tmp_path / "t", train_steps([{"x": np.ones(1)}, {"y": np.ones(1)}]))
    rule = instantiate_rule(load_custom_rule(path, "NeedsX"), trial, {})
    assert [rule.judge_step(0), rule.judge_step(1)] == [Verdict.CONDITION_MET, Verdict.NOT_EVALUATED]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("class R(:\n", "SyntaxError"),
        ("import no_such_module_xyz\n", "ModuleNotFoundError: No module named 'no_such_module_xyz'"),
        ("raise RuntimeError('boom')\n", "RuntimeError: boom"),
        ("from smdebug.rules.rule import Rule\nclass Other(Rule):\n    pass\n", "has no class MyRule (it defines: Other)"),
        ("class MyRule:\n    pass\n", "is not a rule class"),
    ],
)
def test_custom_rule_failures_are_one_line(tmp_path: Path, source: str, expected: str) -> None:
    path = tmp_path / "bad_rule.py"
    path.write_text(source)
    with pytest.raises(CustomRuleError) as info:
        load_custom_rule(path, "MyRule")
    message = str(info.value)
    assert "\n" not in message and str(path) in message and expected in message


def test_custom_rule_file_missing(tmp_path: Path) -> None:
    with pytest.raises(CustomRuleError, match="does not exist"):
        load_custom_rule(tmp_path / "nope.py", "R")


def test_a_custom_constructor_failing_otherwise_is_an_error_status_not_a_traceback(tmp_path: Path) -> None:
    from sdlocal.evaluator.api import evaluate_trial
    from sdlocal.evaluator.status import Status

    path = tmp_path / "r.py"
    path.write_text(
        "from smdebug.rules.rule import Rule\n"
        "class FirstGradient(Rule):\n"
        "    def __init__(self, base_trial):\n"
        "        super().__init__(base_trial)\n"
        "        self.name = base_trial.tensor_names(collection='gradients')[0]\n"
        "    def invoke_at_step(self, step):\n"
        "        return False\n"
    )
    trial_dir = tmp_path / "t"
    make_trial(trial_dir, train_steps([{"x": np.ones(1)}]))
    with pytest.raises(CustomRuleError, match=r"Rule FirstGradient could not be built: IndexError: list index out of range"):
        instantiate_rule(load_custom_rule(path, "FirstGradient"), create_trial(str(trial_dir)), {})
    status = evaluate_trial(str(trial_dir), "FirstGradient", {}, custom_rule_file=str(path))
    assert status.status is Status.ERROR
    assert status.status_details.endswith("could not be built: IndexError: list index out of range")


def test_each_tensor_rule_owns_its_default_collections() -> None:
    """smdebug_rulesconfig's ruleConfigs.json entries come first, exactly as written there; the
    collections sdlocal adds come after them; profiler rules bring none."""
    from smdebug_rulesconfig.debugger_rules._utils import _get_rule_config

    from sdlocal.evaluator.registry import BUILTIN_RULES, default_collections, rule_kind

    added = {}
    for name, cls in BUILTIN_RULES.items():
        ours = [(c.name, c.parameter_map) for c in default_collections(name)]
        assert ours == [(c.name, c.parameter_map) for c in cls.default_collections]
        if rule_kind(name) == "profiler":
            assert ours == [], name
            continue
        config = _get_rule_config(name) or {}
        theirs = [(e["CollectionName"], {k: str(v) for k, v in (e.get("CollectionParameters") or {}).items()})
                  for e in config.get("CollectionConfigurations") or []]
        assert ours[:len(theirs)] == theirs, name
        if ours[len(theirs):]:
            added[name] = [n for n, _ in ours[len(theirs):]]
    assert added == {"ClassImbalance": ["labels", "predictions"], "Confusion": ["labels", "predictions"],
                     "SaturatedActivation": ["tanh_input", "sigmoid_input"], "PoorWeightInitialization": ["gradients"],
                     "TreeDepth": ["trees"], "CreateXgboostReport": ["average_shap", "losses"],
                     "Overfit": ["losses"], "Overtraining": ["losses"],
                     **{name: ["sdlocal_records"] for name in (
                         "EvaluationMisuse", "FrozenParametersChanged", "GradientsNotReset", "ParametersNotTraining",
                         "RepeatedBatches", "ReplicaDivergence")}}
    assert default_collections("NoSuchRule") == ()


def test_rule_kind() -> None:
    from sdlocal.evaluator import ProfilerRule
    from sdlocal.evaluator.registry import rule_kind

    assert rule_kind("VanishingGradient") == "debugger"
    assert rule_kind("ProfilerReport") == "profiler" and rule_kind("StepOutlier") == "profiler"
    assert rule_kind(ProfilerRule) == "profiler" and rule_kind(Rule) == "debugger"
    with pytest.raises(UnknownRuleError, match="Did you mean: StepOutlier"):
        rule_kind("StepOutlire")
