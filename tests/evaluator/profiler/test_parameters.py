"""Profiler rules' parameters arrive as strings (the SageMaker SDK sends every one, "None"
included); a bad value is one error naming the rule and the parameter."""
from __future__ import annotations

from pathlib import Path

import pytest
from smdebug_rulesconfig.profiler_rules import rules as sdk_rules

from sdlocal.evaluator.errors import RuleParameterError
from sdlocal.evaluator.profiler_rules import builtin_profiler_rule_classes
from sdlocal.evaluator.profiler_trial import ProfilerTrial
from sdlocal.evaluator.registry import get_rule_class, instantiate_rule


@pytest.fixture
def trial(tmp_path: Path) -> ProfilerTrial:
    return ProfilerTrial.open(tmp_path)


SDK_NAMED = [c.__name__ for c in builtin_profiler_rule_classes() if hasattr(sdk_rules, c.__name__)]


def test_the_sdk_names_all_but_one() -> None:
    # smdebug_rulesconfig 1.0.1 has no OverallFrameworkMetrics (ProfilerReport runs it)
    assert {c.__name__ for c in builtin_profiler_rule_classes()} - set(SDK_NAMED) == {"OverallFrameworkMetrics"}


@pytest.mark.parametrize("name", [n for n in SDK_NAMED if n != "ProfilerReport"])
def test_the_sdks_parameters_as_strings(trial: ProfilerTrial, name: str) -> None:
    """What `ProfilerRule.sagemaker(rule_configs.<Name>())` sends: every parameter, stringified."""
    sent = {k: str(v) for k, v in getattr(sdk_rules, name)().rule_parameters.items() if k != "rule_to_invoke"}
    rule = instantiate_rule(get_rule_class(name), trial, sent)
    assert rule.scan_interval_us == 60_000_000  # type: ignore[attr-defined]
    if "patience" in sent:
        assert rule.patience == int(sent["patience"])  # type: ignore[attr-defined]


def test_the_sdks_profiler_report(trial: ProfilerTrial) -> None:
    sent = {k: str(v) for k, v in sdk_rules.ProfilerReport(CPUBottleneck_threshold=20).rule_parameters.items()
            if k != "rule_to_invoke"}
    rule = instantiate_rule(get_rule_class("ProfilerReport"), trial, sent)
    assert next(r for r in rule.rules if r.rule_name == "CPUBottleneck").threshold == 20.0  # type: ignore[attr-defined]


@pytest.mark.parametrize("name,param,value,reason", [
    ("BatchSize", "cpu_threshold_p95", "high", "expected a number"),
    ("BatchSize", "window", "0", "must be >= 1"),
    ("BatchSize", "patience", "12.5", "expected an integer"),
    ("CPUBottleneck", "threshold", "101", "must be <= 100"),
    ("CPUBottleneck", "gpu_threshold", "-1", "must be >= 0"),
    ("IOBottleneck", "io_threshold", "", "a value is required"),
    ("Dataloader", "min_threshold", "seventy", "expected a number"),
    ("Dataloader", "max_threshold", "50", "must be >= min_threshold (70)"),
    ("GPUMemoryIncrease", "increase", "NaN", "expected a number, not NaN"),
    ("LoadBalancing", "threshold", "None", "a value is required"),
    ("LoadBalancing", "min_samples", "-3", "must be >= 0"),
    ("LowGPUUtilization", "threshold_p5", "True", "expected a number"),
    ("MaxInitializationTime", "threshold", "-5", "must be >= 0"),
    ("StepOutlier", "mode", "TRAINING", "expected one of TRAIN, EVAL, PREDICT, GLOBAL"),
    ("StepOutlier", "n_outliers", "ten", "expected an integer"),
    ("OverallSystemUsage", "scan_interval_us", "0", "must be >= 1"),
    ("ProfilerReport", "scan_interval_us", "1 minute", "expected an integer"),
])
def test_bad_value_names_rule_and_parameter(trial: ProfilerTrial, name: str, param: str, value: str, reason: str) -> None:
    with pytest.raises(RuleParameterError) as info:
        instantiate_rule(get_rule_class(name), trial, {param: value})
    assert str(info.value) == f"Rule {name}: invalid value {value!r} for parameter '{param}': {reason}"


def test_unknown_parameter_lists_the_known_ones(trial: ProfilerTrial) -> None:
    with pytest.raises(RuleParameterError) as info:
        instantiate_rule(get_rule_class("StepOutlier"), trial, {"std_dev": "2"})
    assert str(info.value) == ("Rule StepOutlier: invalid value '2' for parameter 'std_dev': unknown parameter "
                               "(known: stddev, mode, n_outliers, scan_interval_us)")


def test_string_values_are_parsed(trial: ProfilerTrial) -> None:
    rule = instantiate_rule(get_rule_class("StepOutlier"), trial,
                            {"stddev": "2.5", "mode": "ModeKeys.EVAL", "n_outliers": "4.0", "scan_interval_us": "1000000"})
    assert (rule.stddev, rule.mode.name, rule.n_outliers, rule.scan_interval_us) == (2.5, "EVAL", 4, 1_000_000)  # type: ignore[attr-defined]
    assert rule.report["RuleParameters"] == "stddev:2.5\nmode:EVAL\nn_outliers:4"
    rule = instantiate_rule(get_rule_class("StepOutlier"), trial, {"mode": "None"})
    assert rule.mode is None  # type: ignore[attr-defined]
