"""spec_from_request: the SDK v2 request body, flags, validation messages, collection merging."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sdlocal.launcher.errors import SpecError
from sdlocal.launcher.spec.load import load_request
from sdlocal.launcher.spec.model import JobSpec
from sdlocal.launcher.spec.overrides import Overrides, RuleFlag, parse_collection, parse_kv
from sdlocal.launcher.spec.parse import spec_from_request

DATA = Path(__file__).parents[1] / "data"


@pytest.fixture
def src(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text("print('hi')\n")
    return tmp_path


def parse(req: dict[str, Any], src: Path, **kw: Any) -> JobSpec:
    kw.setdefault("check_rule_names", False)
    return spec_from_request(req, base_dir=src, **kw)


def sdk_request() -> dict[str, Any]:
    return json.loads((DATA / "sdk_v2_request.json").read_text())


def test_sdk_v2_request_body(src: Path) -> None:
    spec = parse(sdk_request(), src)
    job = "pytorch-training-2026-11-22-10-00-00-123"
    assert spec.job_name == job
    assert spec.entry_point == "train.py"  # from the json-encoded sagemaker_program
    # the SDK's sourcedir.tar.gz is fetched by the job (launcher/job/staging.py), not at parse time
    assert spec.source_s3_uri == f"s3://sagemaker-us-east-1-123456789012/{job}/source/sourcedir.tar.gz"
    assert not spec.warnings
    assert dict(spec.hyperparameters) == {"lr": "0.01", "steps": "200", "optimizer": "sgd"}
    assert spec.request_hyperparameters["sagemaker_program"] == '"train.py"'  # as sent: hyperparameters.json
    assert spec.training_image and spec.training_image.endswith("pytorch-training:2.1.0-cpu-py310")
    for name in ("RoleArn", "ResourceConfig.VolumeSizeInGB", "VpcConfig",
                 "DebugRuleConfigurations[].VolumeSizeInGB",
                 "AlgorithmSpecification.EnableSageMakerMetricsTimeSeries"):
        assert name in spec.ignored_fields
    for used in ("Environment", "InputDataConfig", "AlgorithmSpecification.TrainingInputMode", "OutputDataConfig",
                 "ResourceConfig", "StoppingCondition", "EnableNetworkIsolation",
                 "EnableInterContainerTrafficEncryption"):
        assert used not in spec.ignored_fields
    assert spec.stopping.max_runtime_s == 86400 and not spec.containers.network_isolation
    assert [(c.name, c.source, c.input_mode) for c in spec.channels] == [
        ("training", "s3://sagemaker-us-east-1-123456789012/data", "File")]
    assert spec.instance_type == "ml.m5.xlarge" and dict(spec.environment) == {}
    assert spec.model_artifacts == f"s3://sagemaker-us-east-1-123456789012/{job}/output/model.tar.gz"
    assert spec.ignored_fields.count("DebugRuleConfigurations[].VolumeSizeInGB") == 1
    assert "ml.t3.medium" in {r.instance_type for r in spec.debug_rules}  # kept: the docker runtime's limits
    # paths derived as the service does: never the S3OutputPath verbatim
    assert spec.debug_output == f"s3://sagemaker-us-east-1-123456789012/{job}/debug-output"
    assert [r.name for r in spec.debug_rules] == ["VanishingGradient", "ExplodingTensor", "CustomGradientRule"]
    assert spec.debug_rules[0].output == f"s3://sagemaker-us-east-1-123456789012/{job}/rule-output/VanishingGradient"
    assert spec.debug_rules[2].is_custom and not spec.debug_rules[0].is_custom
    assert not [w for w in spec.warnings if "RuleEvaluatorImage" in w]  # both ECR images = built-in evaluator
    assert [r.name for r in spec.profiler_rules] == ["ProfilerReport-1700000000"]
    assert spec.profiler and spec.profiler.interval_ms == 500
    assert spec.profiler.profiler_output.endswith(f"/{job}/profiler-output")
    # duplicate gradients entries merged: the user's explicit entry wins, keys merged
    assert spec.hook is not None
    colls = {c.name: dict(c.parameters) for c in spec.hook.collections}
    assert colls["gradients"] == {"save_interval": "10", "reductions": "mean"}
    assert colls["losses"] == {"save_interval": "5"}
    cfg = spec.hook.to_container_config("/x/tensors")
    assert cfg["LocalPath"] == "/x/tensors" and cfg["HookParameters"] == {"save_interval": "10"}
    assert [c["CollectionName"] for c in cfg["CollectionConfigurations"]].count("gradients") == 1


def test_rule_default_collections_merged_user_entry_wins(src: Path) -> None:
    req = {
        "EntryPoint": "train.py",
        "DebugHookConfig": {"CollectionConfigurations": [
            {"CollectionName": "relu_output", "CollectionParameters": {"save_interval": "7"}}]},
        "DebugRuleConfigurations": [{"RuleConfigurationName": "DeadRelu"},
                                    {"RuleConfigurationName": "VanishingGradient"}],
    }
    spec = parse(req, src)
    assert spec.hook is not None
    colls = {c.name: dict(c.parameters) for c in spec.hook.collections}
    # DeadRelu's default brings include_regex; the user's save_interval wins
    assert colls["relu_output"] == {"include_regex": ".*relu_output", "save_interval": "7"}
    assert colls["gradients"] == {"save_interval": "500"}  # VanishingGradient's default, added
    assert spec.debug_rules[0].rule_to_invoke == "DeadRelu"  # defaulted to the configuration name
    assert spec.job_name.startswith("sdlocal-")
    assert spec.debug_output.startswith("s3://sdlocal/jobs/sdlocal-")


def test_rule_default_schedule_yields_to_hook_parameters(src: Path) -> None:
    req = {
        "EntryPoint": "train.py",
        "DebugHookConfig": {"HookParameters": {"save_interval": "5"}, "CollectionConfigurations": [
            {"CollectionName": "losses", "CollectionParameters": {"save_interval": "500"}}]},
        "DebugRuleConfigurations": [{"RuleConfigurationName": "DeadRelu"},
                                    {"RuleConfigurationName": "VanishingGradient"},
                                    {"RuleConfigurationName": "LossNotDecreasing"}],
    }
    spec = parse(req, src)
    assert spec.hook is not None
    colls = {c.name: dict(c.parameters) for c in spec.hook.collections}
    # the rules' default save_interval=500 gives way to the hook's save_interval=5 ...
    assert colls["gradients"] == {}
    assert colls["relu_output"] == {"include_regex": ".*relu_output"}
    # ... but an entry the request spells out is kept as written
    assert colls["losses"] == {"save_interval": "500"}


def test_no_hook_config_without_rules(src: Path) -> None:
    spec = parse({"EntryPoint": "train.py"}, src)
    assert spec.hook is None and spec.debug_rules == ()


def test_flags_build_a_spec(src: Path, tmp_path: Path) -> None:
    (tmp_path / "my_rules.py").write_text("class MyRule: pass\n")
    custom = RuleFlag.custom(str(tmp_path / "my_rules.py") + ":MyRule", (("threshold", "3"),))
    ov = Overrides(
        entry_point="train.py", source_dir=src, job_name="flag-job",
        hyperparameters=(parse_kv("lr=1e3"), ("steps", "5")),
        rules=(RuleFlag("VanishingGradient", (parse_kv("threshold=1e-6"),)), custom),
        hook_params=(("save_interval", "2"),), collections=(parse_collection("weights:save_interval=4,reductions=l2"),),
        s3_output_path="s3://mybucket/out/",
    )
    req = ov.apply({"HyperParameters": {"lr": "0.1", "batch": "8"}})
    spec = parse(req, src, default_output_path=ov.s3_output_path or "")
    assert spec.job_name == "flag-job"
    assert dict(spec.hyperparameters) == {"lr": "1e3", "batch": "8", "steps": "5"}
    assert spec.debug_output == "s3://mybucket/out/flag-job/debug-output"
    vg, my = spec.debug_rules
    assert dict(vg.parameters) == {"rule_to_invoke": "VanishingGradient", "threshold": "1e-6"}
    assert my.parameters["source_s3_uri"] == str(tmp_path / "my_rules.py") and my.parameters["threshold"] == "3"
    assert spec.hook is not None and spec.hook.hook_parameters == {"save_interval": "2"}
    colls = {c.name: dict(c.parameters) for c in spec.hook.collections}
    assert colls["weights"] == {"save_interval": "4", "reductions": "l2"}
    assert "gradients" in colls  # VanishingGradient's default; the custom rule brings none


def test_bad_flag_values() -> None:
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_kv("threshold")
    with pytest.raises(ValueError, match="FILE.py:ClassName"):
        RuleFlag.custom("my_rules.py")


def _rules(n: int) -> list[dict[str, Any]]:
    return [{"RuleConfigurationName": f"R{i}", "RuleParameters": {"rule_to_invoke": "VanishingGradient"}}
            for i in range(n)]


@pytest.mark.parametrize(
    ("patch", "field", "message"),
    [
        ({"DebugRuleConfigurations": _rules(21)}, "DebugRuleConfigurations", "maximum is 20"),
        ({"ProfilerRuleConfigurations": _rules(21)}, "ProfilerRuleConfigurations", "maximum is 20"),
        ({"DebugRuleConfigurations": _rules(1) * 2}, "RuleConfigurationName", "unique"),
        ({"DebugRuleConfigurations": [{"RuleConfigurationName": "x" * 257}]},
         "DebugRuleConfigurations[0].RuleConfigurationName", "1-256"),
        ({"DebugRuleConfigurations": [{"RuleConfigurationName": ""}]},
         "DebugRuleConfigurations[0].RuleConfigurationName", "1-256"),
        ({"DebugRuleConfigurations": [{"RuleConfigurationName": "A", "RuleParameters": {"t": "9" * 257}}]},
         "DebugRuleConfigurations[0].RuleParameters.t", "257 characters; the maximum is 256"),
        ({"DebugRuleConfigurations": [{"RuleConfigurationName": "A",
                                       "RuleParameters": {f"k{i}": "1" for i in range(101)}}]},
         "DebugRuleConfigurations[0].RuleParameters", "maximum is 100"),
        ({"DebugRuleConfigurations": [{"RuleConfigurationName": "A", "RuleParameters": {"t": [1]}}]},
         "DebugRuleConfigurations[0].RuleParameters.t", "must be a string"),
        ({"DebugHookConfig": {"HookParameters": {f"k{i}": "1" for i in range(21)}}},
         "DebugHookConfig.HookParameters", "maximum is 20"),
        ({"DebugHookConfig": {"CollectionConfigurations": [{"CollectionName": f"c{i}"} for i in range(21)]}},
         "DebugHookConfig.CollectionConfigurations", "maximum is 20"),
        ({"DebugHookConfig": {"CollectionConfigurations": [
            {"CollectionName": "c", "CollectionParameters": {f"k{i}": "1" for i in range(21)}}]}},
         "DebugHookConfig.CollectionConfigurations[0].CollectionParameters", "maximum is 20"),
        ({"ProfilerConfig": {"ProfilingIntervalInMilliseconds": 300}},
         "ProfilerConfig.ProfilingIntervalInMilliseconds", "100, 200, 500, 1000, 5000, 60000"),
        ({"EntryPoint": "missing.py"}, "EntryPoint", "not found"),
        ({"EntryPoint": None}, "EntryPoint", "required"),
        ({"TrainingJobName": "bad_name!"}, "TrainingJobName", "pattern"),
        ({"TrainingJobName": "job-a\n"}, "TrainingJobName", "pattern"),  # `$` alone matches before a newline
        ({"DebugHookConfig": {"S3OutputPath": "/local/path"}}, "DebugHookConfig.S3OutputPath", "S3 URI"),
        ({"DebugRuleConfigurations": [{"RuleConfigurationName": "C",
                                       "RuleParameters": {"source_s3_uri": "nope.py"}}]},
         "DebugRuleConfigurations[0].RuleParameters.source_s3_uri", "not found"),
    ],
)
def test_validation_errors_name_the_field(src: Path, patch: dict[str, Any], field: str, message: str) -> None:
    req = {"EntryPoint": "train.py", **patch}
    with pytest.raises(SpecError) as info:
        parse(req, src)
    assert info.value.field == field
    assert message in info.value.message


def test_unknown_builtin_rule_suggests_close_match(src: Path) -> None:
    req = {"EntryPoint": "train.py", "DebugRuleConfigurations": [{"RuleConfigurationName": "VanishingGradiant"}]}
    with pytest.raises(SpecError) as info:
        parse(req, src, check_rule_names=True)
    assert info.value.field == "DebugRuleConfigurations[0].RuleParameters.rule_to_invoke"
    assert "VanishingGradient" in info.value.message


def test_unknown_builtin_profiler_rule_is_a_spec_error_and_known_ones_get_an_evaluator(src: Path) -> None:
    from sdlocal.launcher.job.evaluators import profiler_rule_runs

    req = {"EntryPoint": "train.py", "ProfilerRuleConfigurations": [
        {"RuleConfigurationName": "ProfilerReport"}, {"RuleConfigurationName": "StepOutlier"},
        {"RuleConfigurationName": "Slow", "RuleParameters": {"rule_to_invoke": "StepOutlyer"}}]}
    with pytest.raises(SpecError) as info:
        parse(req, src, check_rule_names=True)
    assert info.value.field == "ProfilerRuleConfigurations[2].RuleParameters.rule_to_invoke"
    assert "StepOutlier" in info.value.message
    (src / "mine.py").write_text("class Mine: pass\n")
    req["ProfilerRuleConfigurations"][2] = {"RuleConfigurationName": "Mine", "RuleParameters": {
        "rule_to_invoke": "Mine", "source_s3_uri": "mine.py"}}
    spec = parse(req, src, check_rule_names=True)
    assert [profiler_rule_runs(r) for r in spec.profiler_rules] == [True, True, True]
    unchecked = parse({"EntryPoint": "train.py", "ProfilerRuleConfigurations": [{"RuleConfigurationName": "Nope"}]},
                      src, check_rule_names=False)
    assert not profiler_rule_runs(unchecked.profiler_rules[0])


def test_load_request_yaml_and_json(tmp_path: Path) -> None:
    good = tmp_path / "job.yaml"
    good.write_text("EntryPoint: train.py\nHyperParameters:\n  lr: 0.5\n")
    assert load_request(good) == {"EntryPoint": "train.py", "HyperParameters": {"lr": 0.5}}
    bad = tmp_path / "bad.yaml"
    bad.write_text("EntryPoint: [train.py\n")
    with pytest.raises(SpecError, match="malformed YAML") as info:
        load_request(bad)
    assert info.value.field == str(bad)
    badj = tmp_path / "bad.json"
    badj.write_text("{")
    with pytest.raises(SpecError, match="malformed JSON"):
        load_request(badj)
    lst = tmp_path / "list.yaml"
    lst.write_text("- a\n")
    with pytest.raises(SpecError, match="map of request fields"):
        load_request(lst)
    with pytest.raises(SpecError, match="cannot read"):
        load_request(tmp_path / "absent.yaml")


def test_yaml_numbers_become_strings(src: Path) -> None:
    spec = parse({"EntryPoint": "train.py", "HyperParameters": {"lr": 0.5, "flag": True}}, src)
    assert dict(spec.hyperparameters) == {"lr": "0.5", "flag": "true"}


@pytest.mark.parametrize(("source", "message"), [
    ("def broken(:\n", "line 1: SyntaxError"),
    ("class Other:\n    pass\n", "class 'MyRule' is not defined"),
])
def test_custom_rule_file_checked_before_start(src: Path, source: str, message: str) -> None:
    (src / "my_rule.py").write_text(source)
    req = {"EntryPoint": "train.py", "DebugRuleConfigurations": [
        {"RuleConfigurationName": "Mine",
         "RuleParameters": {"rule_to_invoke": "MyRule", "source_s3_uri": "my_rule.py"}}]}
    with pytest.raises(SpecError, match=message) as err:
        parse(req, src)
    assert "my_rule.py" in str(err.value)


def test_custom_rule_file_that_parses_is_accepted(src: Path) -> None:
    (src / "my_rule.py").write_text("import not_installed_here\n\nclass MyRule:\n    pass\n")
    req = {"EntryPoint": "train.py", "DebugRuleConfigurations": [
        {"RuleConfigurationName": "Mine",
         "RuleParameters": {"rule_to_invoke": "MyRule", "source_s3_uri": "my_rule.py"}}]}
    assert parse(req, src).debug_rules[0].parameters["source_s3_uri"] == str(src / "my_rule.py")


def test_local_custom_rule_files_are_uploaded_and_rewritten(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("")
    (tmp_path / "my_rule.py").write_text("class MyRule:\n    pass\n")
    req = {"TrainingJobName": "j-1", "EntryPoint": "train.py", "DebugHookConfig": {"S3OutputPath": "s3://b/out"},
           "DebugRuleConfigurations": [
               {"RuleConfigurationName": "Mine", "RuleParameters": {"rule_to_invoke": "MyRule", "source_s3_uri": "my_rule.py"}},
               {"RuleConfigurationName": "Remote", "RuleParameters": {"rule_to_invoke": "X", "source_s3_uri": "s3://b/r/x.py"}},
               {"RuleConfigurationName": "VG", "RuleParameters": {"rule_to_invoke": "VanishingGradient"}}]}
    spec = spec_from_request(req, base_dir=tmp_path)
    assert spec.debug_rules[0].local_rule_file == tmp_path / "my_rule.py"
    uploads: list[tuple[Path, str]] = []
    uploaded = spec.with_uploaded_rule_code(lambda path, uri: uploads.append((path, uri)))
    assert uploads == [(tmp_path / "my_rule.py", "s3://b/out/j-1/rule-code/Mine/my_rule.py")]
    assert [r.parameters.get("source_s3_uri") for r in uploaded.debug_rules] == [
        "s3://b/out/j-1/rule-code/Mine/my_rule.py", "s3://b/r/x.py", None]
    assert all(r.local_rule_file is None for r in uploaded.debug_rules)
    assert spec.debug_rules[0].local_rule_file is not None  # the original spec is unchanged (frozen)


def test_a_rule_file_inside_a_custom_rule_image_is_neither_checked_nor_uploaded(src: Path) -> None:
    rule = {"RuleConfigurationName": "WeightNorm", "RuleEvaluatorImage": "my-rules:latest",
            "RuleParameters": {"rule_to_invoke": "WeightNormRule", "source_s3_uri": "/opt/rules/weight_norm_rule.py"}}
    spec = parse({"EntryPoint": "train.py", "DebugRuleConfigurations": [rule]}, src)
    (only,) = spec.debug_rules
    assert only.rule_file_in_image and only.local_rule_file is None
    assert only.parameters["source_s3_uri"] == "/opt/rules/weight_norm_rule.py"
    assert spec.with_uploaded_rule_code(lambda path, uri: pytest.fail("nothing to upload")) == spec
    # without a custom image (or with a relative path) a missing file is still an error before start
    for image, path in ((None, "/opt/rules/weight_norm_rule.py"), ("my-rules:latest", "weight_norm_rule.py")):
        bad = {**rule, "RuleEvaluatorImage": image, "RuleParameters": {**rule["RuleParameters"], "source_s3_uri": path}}
        with pytest.raises(SpecError, match="not found"):
            parse({"EntryPoint": "train.py", "DebugRuleConfigurations": [bad]}, src)


def test_rule_instance_type_is_kept_and_checked(src: Path) -> None:
    rule = {"RuleConfigurationName": "VG", "InstanceType": "ml.t3.medium",
            "RuleParameters": {"rule_to_invoke": "VanishingGradient"}}
    spec = parse({"EntryPoint": "train.py", "DebugRuleConfigurations": [rule]}, src)
    assert spec.debug_rules[0].instance_type == "ml.t3.medium"
    assert not [f for f in spec.ignored_fields if "InstanceType" in f]
    with pytest.raises(SpecError) as err:
        parse({"EntryPoint": "train.py", "DebugRuleConfigurations": [{**rule, "InstanceType": "big"}]}, src)
    assert err.value.field == "DebugRuleConfigurations[0].InstanceType"


def test_a_built_in_rules_collection_names_are_saved(src: Path) -> None:
    # AllZero has no default collection: told to judge weights and gradients, the hook must save them
    # (before, the job saved losses only and the rule judged nothing)
    req = {"EntryPoint": "train.py", "DebugRuleConfigurations": [
        {"RuleConfigurationName": "AllZero", "RuleParameters": {"rule_to_invoke": "AllZero",
                                                                 "collection_names": "weights, gradients"}}]}
    colls = {c.name: dict(c.parameters) for c in parse(req, src).hook.collections}
    assert {"weights", "gradients"} <= set(colls)
    (src / "mine.py").write_text("from smdebug.rules.rule import Rule\n\nclass Mine(Rule):\n    pass\n")
    custom = {"EntryPoint": "train.py", "DebugRuleConfigurations": [
        {"RuleConfigurationName": "Mine", "RuleParameters": {"source_s3_uri": "mine.py", "rule_to_invoke": "Mine",
                                                             "collection_names": "weights"}}]}
    assert "weights" not in {c.name for c in parse(custom, src).hook.collections}  # a custom rule's own business
