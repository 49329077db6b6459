"""Parsing a CreateTrainingJob-shaped request into a JobSpec (launcher/spec/model.py): every field
checked for type and value with the service's limits and wording, one SpecError naming the field;
fields that matter only on SageMaker listed as ignored."""
from __future__ import annotations

import ast
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sdlocal.evaluator import recommended
from sdlocal.evaluator.rule import RuleKind
from sdlocal.launcher.errors import SpecError
from sdlocal.launcher.spec.algorithm import (
    merged_definitions,
    parse_builtin_algorithm,
    parse_container_command,
    parse_metric_definitions,
)
from sdlocal.launcher.spec.collection_configs import (
    CollectionConfig,
    merge_collections,
    rule_default_collections,
)
from sdlocal.launcher.spec.distribution import parse_distribution
from sdlocal.launcher.spec.hook_params import check_hook_parameters
from sdlocal.launcher.spec.inputs import (
    parse_channels,
    parse_environment,
    parse_instance_count,
    parse_instance_type,
    parse_source_dir,
)
from sdlocal.launcher.spec.job_settings import (
    parse_container_settings,
    parse_stopping_condition,
)
from sdlocal.launcher.spec.model import (
    DEFAULT_S3_OUTPUT_PATH,
    HookSpec,
    JobSpec,
    ProfilerSpec,
    RuleSpec,
    TensorBoardSpec,
)
from sdlocal.launcher.spec.values import (
    MAX_MAP_ENTRIES,
    MAX_NAME_CHARS,
    MAX_RULE_PARAMETERS,
    MAX_RULES,
    PROFILING_INTERVALS_MS,
    as_list,
    as_mapping,
    check_entry_point,
    check_job_name,
    decode_sdk_hyperparameter,
    instance_resources,
    is_debugger_rule_image,
    local_path,
    optional_str,
    s3_base,
    string_map,
)

_USED_FIELDS = frozenset(
    {
        "TrainingJobName", "DebugHookConfig", "DebugRuleConfigurations", "ProfilerRuleConfigurations",
        "ProfilerConfig", "TensorBoardOutputConfig", "HyperParameters", "EntryPoint", "SourceDir",
        "AlgorithmSpecification", "InputDataConfig", "Environment", "ResourceConfig", "OutputDataConfig",
        "StoppingCondition", "EnableNetworkIsolation", "EnableInterContainerTrafficEncryption",  # _job_settings.py
    }
)


_ALGORITHM_FIELDS = frozenset({"TrainingImage", "TrainingInputMode", "MetricDefinitions", "ContainerEntrypoint",
                               "ContainerArguments"})


_RULE_FIELDS = frozenset({"RuleConfigurationName", "RuleEvaluatorImage", "RuleParameters", "InstanceType"})


_HOOK_FIELDS = frozenset({"S3OutputPath", "LocalPath", "HookParameters", "CollectionConfigurations"})


def _or(value: Any, default: Any) -> Any:
    """`value` unless the field is absent (None): a present but empty or wrong value is an error."""
    return default if value is None else value


def default_job_name(now: datetime) -> str:
    return "sdlocal-" + now.strftime("%Y-%m-%d-%H-%M-%S-") + f"{now.microsecond // 1000:03d}"


def spec_from_request(
    request: Mapping[str, Any],
    *,
    base_dir: Path | None = None,
    now: datetime | None = None,
    check_rule_names: bool = True,
    default_output_path: str = DEFAULT_S3_OUTPUT_PATH,
) -> JobSpec:
    """Parse and validate a CreateTrainingJob-shaped request into a JobSpec.

    `base_dir` resolves relative paths (the spec file's folder); `default_output_path` is used
    when DebugHookConfig.S3OutputPath is absent; `check_rule_names` asks the evaluator's registry.
    """
    return parse_request(request, base_dir or Path.cwd(), now or datetime.now(timezone.utc), check_rule_names,
                         default_output_path)


def parse_request(
    req: Mapping[str, Any], base_dir: Path, now: datetime, check_rule_names: bool, default_output: str
) -> JobSpec:
    req = as_mapping(req, "request")
    ignored = [k for k in req if k not in _USED_FIELDS]
    warnings: list[str] = []
    raw_job = req.get("TrainingJobName")
    job = default_job_name(now) if raw_job is None else check_job_name(raw_job)

    raw_hp = string_map(req.get("HyperParameters"), "HyperParameters", max_entries=100, max_chars=2500)
    sdk_program = raw_hp.get("sagemaker_program")
    sdk_submit_dir = raw_hp.get("sagemaker_submit_directory")
    # The training toolkit decodes the SDK's json-encoded values and keeps sagemaker_* to itself.
    hyperparameters = {k: decode_sdk_hyperparameter(v) for k, v in raw_hp.items() if not k.startswith("sagemaker_")}

    source_dir, source_uri = parse_source_dir(req.get("SourceDir"), base_dir, sdk_submit_dir)
    algo = as_mapping(req.get("AlgorithmSpecification"), "AlgorithmSpecification")
    image = optional_str(algo.get("TrainingImage"), "AlgorithmSpecification.TrainingImage")
    if algo.get("TrainingInputMode", "File") not in ("File", "FastFile", "Pipe"):
        raise SpecError("AlgorithmSpecification.TrainingInputMode",
                        f"{algo['TrainingInputMode']!r} is not one of File, FastFile, Pipe")
    ignored += [f"AlgorithmSpecification.{k}" for k in algo if k not in _ALGORITHM_FIELDS]
    channels = parse_channels(req.get("InputDataConfig"), base_dir, algo.get("TrainingInputMode", "File"),
                              ignored, warnings)
    metric_definitions = parse_metric_definitions(algo.get("MetricDefinitions"))
    # what runs: a container command, the script (script mode), or a built-in algorithm (its image)
    command = parse_container_command(algo)
    entry_point = req.get("EntryPoint") or (decode_sdk_hyperparameter(sdk_program) if sdk_program else None)
    algorithm = None
    if command is None and not entry_point:
        found = parse_builtin_algorithm(image, raw_hp, {c.name: c.to_input_data_config() for c in channels})
        if found is None:
            raise SpecError("EntryPoint", "required: the training script (or HyperParameters.sagemaker_program), "
                                          "a SageMaker XGBoost algorithm image or a ContainerEntrypoint")
        algorithm, own_definitions = found
        metric_definitions = merged_definitions(own_definitions, metric_definitions)
    if entry_point is not None and not isinstance(entry_point, str):
        raise SpecError("EntryPoint", f"must be a path, got {type(entry_point).__name__}")
    if command is None and algorithm is None:
        assert entry_point
        check_entry_point(entry_point, source_dir, source_uri is None)
    code_given = req.get("SourceDir") is not None or sdk_submit_dir is not None
    resources = as_mapping(req.get("ResourceConfig"), "ResourceConfig")
    ignored += [f"ResourceConfig.{k}" for k in resources if k not in ("InstanceType", "InstanceCount")]
    instance_type = parse_instance_type(resources)
    instance_count = parse_instance_count(resources)
    distribution = parse_distribution(raw_hp)
    hook_req = as_mapping(req.get("DebugHookConfig"), "DebugHookConfig")
    ignored += [f"DebugHookConfig.{k}" for k in hook_req if k not in _HOOK_FIELDS]
    out_base = s3_base(_or(hook_req.get("S3OutputPath"), default_output), "DebugHookConfig.S3OutputPath")
    job_output = f"{out_base}/{job}"
    data_out = as_mapping(req.get("OutputDataConfig"), "OutputDataConfig")
    ignored += [f"OutputDataConfig.{k}" for k in data_out if k != "S3OutputPath"]
    model_base = s3_base(_or(data_out.get("S3OutputPath"), out_base), "OutputDataConfig.S3OutputPath")

    debug_rules = _rules(req, "DebugRuleConfigurations", job_output, RuleKind.DEBUGGER, base_dir, ignored, warnings)
    prof_req = as_mapping(req.get("ProfilerConfig"), "ProfilerConfig")
    prof_base = s3_base(_or(prof_req.get("S3OutputPath"), out_base), "ProfilerConfig.S3OutputPath")
    profiler_rules = _rules(
        req, "ProfilerRuleConfigurations", f"{prof_base}/{job}", RuleKind.PROFILER, base_dir, ignored, warnings
    )
    names = [r.name for r in debug_rules + profiler_rules]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SpecError("RuleConfigurationName", f"must be unique within the job; duplicated: {', '.join(dup)}")
    if check_rule_names:
        _check_builtin_rules(debug_rules, "DebugRuleConfigurations")
        _check_builtin_rules(profiler_rules, "ProfilerRuleConfigurations")

    optional_str(hook_req.get("LocalPath"), "DebugHookConfig.LocalPath")
    hook = None
    if "DebugHookConfig" in req or debug_rules:
        hook = _hook(hook_req, f"{job_output}/debug-output", debug_rules)
    profiler = _profiler(prof_req, f"{prof_base}/{job}/profiler-output") if "ProfilerConfig" in req else None
    tb = None
    if req.get("TensorBoardOutputConfig") is not None:
        tb_req = as_mapping(req["TensorBoardOutputConfig"], "TensorBoardOutputConfig")
        tb_base = s3_base(tb_req.get("S3OutputPath"), "TensorBoardOutputConfig.S3OutputPath")
        tb = TensorBoardSpec(f"{tb_base}/{job}/tensorboard-output",
                             optional_str(tb_req.get("LocalPath"), "TensorBoardOutputConfig.LocalPath"))
    return JobSpec(
        job_name=job, entry_point=entry_point or "", source_dir=source_dir, hyperparameters=hyperparameters,
        hook=hook, debug_rules=debug_rules, profiler_rules=profiler_rules, profiler=profiler, tensorboard=tb,
        training_image=algo.get("TrainingImage"), job_output=job_output,
        ignored_fields=tuple(dict.fromkeys(ignored)), warnings=tuple(warnings),
        request_hyperparameters=raw_hp, channels=channels, environment=parse_environment(req.get("Environment")),
        instance_type=instance_type, instance_count=instance_count, distribution=distribution,
        source_s3_uri=source_uri,
        model_output=f"{model_base}/{job}/output",
        stopping=parse_stopping_condition(req.get("StoppingCondition")), containers=parse_container_settings(req),
        algorithm=algorithm, command=command, metric_definitions=metric_definitions,
        code_in_job_folder=(algorithm is not None or command is not None) and not code_given,
    )


def _rules(
    req: Mapping[str, Any], key: str, job_output: str, kind: RuleKind, base_dir: Path,
    ignored: list[str], warnings: list[str],
) -> tuple[RuleSpec, ...]:
    entries = as_list(req.get(key), key)
    if len(entries) > MAX_RULES:
        raise SpecError(key, f"has {len(entries)} rules; the maximum is {MAX_RULES}")
    rules: list[RuleSpec] = []
    wanted_set: tuple[str | None, Any] | None = None  # the recommended set's (image, InstanceType)
    for i, entry in enumerate(entries):
        where = f"{key}[{i}]"
        entry = as_mapping(entry, where)
        ignored += [f"{key}[].{k}" for k in entry if k not in _RULE_FIELDS]
        name = entry.get("RuleConfigurationName")
        if not isinstance(name, str) or not 1 <= len(name) <= MAX_NAME_CHARS:
            raise SpecError(f"{where}.RuleConfigurationName", f"must be a string of 1-{MAX_NAME_CHARS} characters")
        if "/" in name or name in (".", "..") or not name.isprintable():
            raise SpecError(f"{where}.RuleConfigurationName", f"{name!r} cannot name a rule-output folder")
        params = string_map(entry.get("RuleParameters"), f"{where}.RuleParameters", max_entries=MAX_RULE_PARAMETERS)
        params.setdefault("rule_to_invoke", name)
        image = optional_str(entry.get("RuleEvaluatorImage"), f"{where}.RuleEvaluatorImage")
        src = params.get("source_s3_uri")
        if kind is RuleKind.DEBUGGER and recommended.is_recommended(params["rule_to_invoke"]) and not src:
            extra = sorted(set(params) - {"rule_to_invoke"})
            if extra:
                raise SpecError(f"{where}.RuleParameters", f"the {recommended.NAME} set takes no parameters "
                                f"(got {', '.join(extra)}); configure a rule of it in an entry of its own")
            wanted_set = (image, entry.get("InstanceType"))
            continue
        if src is not None and not src.strip("\x00 "):
            raise SpecError(f"{where}.RuleParameters.source_s3_uri", f"{src!r} names no custom rule file")
        in_image = False
        if src and "://" not in src:  # a local custom rule file: resolve it now, fail early
            path = local_path(base_dir, src, f"{where}.RuleParameters.source_s3_uri")
            if path.is_file():
                params["source_s3_uri"] = str(path)
                _check_custom_rule_file(path, params["rule_to_invoke"], f"{where}.RuleParameters")
            elif Path(src).is_absolute() and image and not is_debugger_rule_image(image):
                in_image = True  # baked into the custom rule image (custom_rules/image/): its evaluator loads it
            else:
                raise SpecError(f"{where}.RuleParameters.source_s3_uri", f"custom rule file {path} not found")
        instance_type = entry.get("InstanceType")
        if instance_type is not None:
            try:
                instance_resources(str(instance_type))
            except ValueError as e:
                raise SpecError(f"{where}.InstanceType", str(e)) from None
        rules.append(RuleSpec(name, params, image, f"{job_output}/rule-output/{name}", kind, in_image,
                              None if instance_type is None else str(instance_type)))
    if wanted_set is not None:
        rules += _recommended_rules(rules, wanted_set, job_output)
        if len(rules) > MAX_RULES:
            raise SpecError(key, f"has {len(rules)} rules with the {recommended.NAME} set; the maximum is {MAX_RULES}")
    return tuple(rules)


def _recommended_rules(configured: list[RuleSpec], where: tuple[str | None, Any], job_output: str) -> list[RuleSpec]:
    """The rules of the recommended set (evaluator/recommended.py) the request does not configure
    itself, on the set's entry's RuleEvaluatorImage and InstanceType."""
    image, instance_type = where
    names = {r.name for r in configured} | {r.rule_to_invoke for r in configured}
    return [RuleSpec(name, params, image, f"{job_output}/rule-output/{name}", RuleKind.DEBUGGER, False,
                     None if instance_type is None else str(instance_type))
            for name, params in recommended.expand(names)]


def _check_custom_rule_file(path: Path, class_name: str, where: str) -> None:
    """Fail before anything starts on a rule file that cannot parse or lacks the class.

    The file is parsed, not imported: it may need packages only its evaluator image has; an
    import error is reported by the evaluator as the rule's Error status.
    """
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except SyntaxError as e:
        raise SpecError(f"{where}.source_s3_uri",
                        f"custom rule file {path} line {e.lineno}: SyntaxError: {e.msg}") from e
    defined = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    defined |= {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
    if class_name not in defined:
        raise SpecError(f"{where}.rule_to_invoke", f"class {class_name!r} is not defined in {path}")


def _check_builtin_rules(rules: tuple[RuleSpec, ...], key: str) -> None:
    from sdlocal.evaluator.registry import UnknownRuleError, get_rule_class

    for i, rule in enumerate(rules):
        if rule.is_custom:
            continue
        try:
            get_rule_class(rule.rule_to_invoke)
        except UnknownRuleError as e:
            raise SpecError(f"{key}[{i}].RuleParameters.rule_to_invoke", str(e)) from e


def _hook(hook_req: Mapping[str, Any], debug_output: str, rules: tuple[RuleSpec, ...]) -> HookSpec:
    hook_params = string_map(hook_req.get("HookParameters"), "DebugHookConfig.HookParameters",
                             max_entries=MAX_MAP_ENTRIES)
    raw = as_list(hook_req.get("CollectionConfigurations"), "DebugHookConfig.CollectionConfigurations")
    if len(raw) > MAX_MAP_ENTRIES:
        raise SpecError("DebugHookConfig.CollectionConfigurations",
                        f"has {len(raw)} entries; the maximum is {MAX_MAP_ENTRIES}")
    entries = []
    for i, item in enumerate(raw):
        where = f"DebugHookConfig.CollectionConfigurations[{i}]"
        item = as_mapping(item, where)
        name = item.get("CollectionName")
        if not isinstance(name, str) or not 1 <= len(name) <= MAX_NAME_CHARS:
            raise SpecError(f"{where}.CollectionName", f"must be a string of 1-{MAX_NAME_CHARS} characters")
        params = string_map(item.get("CollectionParameters"), f"{where}.CollectionParameters",
                            max_entries=MAX_MAP_ENTRIES)
        entries.append(CollectionConfig(name, params))
    defaults = [c for r in rules if not r.is_custom for c in rule_default_collections(r.rule_to_invoke)]
    # A built-in rule told which collections to judge (AllZero/TensorVariance `collection_names`)
    # gets them saved too, at the hook's schedule: else it would see nothing of them (docs/rules.md)
    # (built-in collections only: another name has no regex to save it by, and the rule says it judged nothing)
    from sdlocal.hook.config import BUILTIN_REGEX, OPTIONAL_REGEX

    named = {n.strip() for r in rules if not r.is_custom
             for n in r.parameters.get("collection_names", "").split(",") if n.strip()}
    named &= set(BUILTIN_REGEX) | set(OPTIONAL_REGEX)
    defaults += [CollectionConfig(n, {}) for n in sorted(named - {c.name for c in defaults})]
    merged = merge_collections(entries, defaults, hook_params)
    check_hook_parameters(hook_params, entries, merged)
    return HookSpec(debug_output, hook_params, merged)


def _profiler(prof: Mapping[str, Any], profiler_output: str) -> ProfilerSpec:
    interval = prof.get("ProfilingIntervalInMilliseconds", 500)
    try:
        interval_ms = int(interval)
    except (TypeError, ValueError):
        interval_ms = -1
    if interval_ms not in PROFILING_INTERVALS_MS or isinstance(interval, bool):
        allowed = ", ".join(map(str, PROFILING_INTERVALS_MS))
        raise SpecError("ProfilerConfig.ProfilingIntervalInMilliseconds", f"{interval!r} is not one of {allowed}")
    params = string_map(prof.get("ProfilingParameters"), "ProfilerConfig.ProfilingParameters", max_entries=20)
    disabled = prof.get("DisableProfiler", False)
    if not isinstance(disabled, bool):
        raise SpecError("ProfilerConfig.DisableProfiler", f"must be a boolean, got {disabled!r}")
    return ProfilerSpec(profiler_output, interval_ms, params, disabled)
