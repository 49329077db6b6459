"""The job request: the CreateTrainingJob shape (as the SageMaker Python SDK v2 sends it) + sdlocal's
`EntryPoint`/`SourceDir`, parsed and validated at one boundary into frozen dataclasses.

Every problem raises one `SpecError` naming the field, with the service's limits and wording.
Fields that matter only on SageMaker (RoleArn, ResourceConfig, ...) are accepted and listed in
`JobSpec.ignored_fields`, reported once by the caller.
"""
from __future__ import annotations

import ast
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from sdlocal.launcher.errors import SpecError
from sdlocal.launcher.jobdir.training_env import TrainingEnvironment
from sdlocal.launcher.spec.collection_configs import (
    CollectionConfig,
    merge_collections,
    rule_default_collections,
)
from sdlocal.launcher.spec.hook_params import check_hook_parameters
from sdlocal.launcher.spec.inputs import (
    Channel,
    parse_channels,
    parse_environment,
    parse_instance_type,
    parse_source_dir,
)
from sdlocal.launcher.spec.job_settings import (
    ContainerSettings,
    StoppingCondition,
    parse_container_settings,
    parse_stopping_condition,
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

DEFAULT_S3_OUTPUT_PATH = "s3://sdlocal/jobs"
_USED_FIELDS = frozenset(
    {
        "TrainingJobName", "DebugHookConfig", "DebugRuleConfigurations", "ProfilerRuleConfigurations",
        "ProfilerConfig", "TensorBoardOutputConfig", "HyperParameters", "EntryPoint", "SourceDir",
        "AlgorithmSpecification", "InputDataConfig", "Environment", "ResourceConfig", "OutputDataConfig",
        "StoppingCondition", "EnableNetworkIsolation", "EnableInterContainerTrafficEncryption",  # _job_settings.py
    }
)
_RULE_FIELDS = frozenset({"RuleConfigurationName", "RuleEvaluatorImage", "RuleParameters", "InstanceType"})
_HOOK_FIELDS = frozenset({"S3OutputPath", "LocalPath", "HookParameters", "CollectionConfigurations"})


@dataclass(frozen=True)
class HookSpec:
    debug_output: str  # s3://bucket/prefix/<job>/debug-output (derived, never the S3OutputPath verbatim)
    hook_parameters: Mapping[str, str]
    collections: tuple[CollectionConfig, ...]

    def to_container_config(self, local_path: str) -> dict[str, Any]:
        """debughookconfig.json as the training container sees it."""
        return {
            "S3OutputPath": self.debug_output,
            "LocalPath": local_path,
            "HookParameters": dict(self.hook_parameters),
            "CollectionConfigurations": [c.to_request() for c in self.collections],
        }


@dataclass(frozen=True)
class RuleSpec:
    name: str  # RuleConfigurationName
    parameters: Mapping[str, str]  # RuleParameters as sent (rule_to_invoke always set)
    image: str | None
    output: str  # s3://.../<job>/rule-output/<name>
    kind: str  # "debugger" | "profiler"
    rule_file_in_image: bool = False  # source_s3_uri is a path inside its custom RuleEvaluatorImage
    instance_type: str | None = None  # the evaluator's InstanceType: its container limits (docker runtime)

    @property
    def rule_to_invoke(self) -> str:
        return self.parameters["rule_to_invoke"]

    @property
    def is_custom(self) -> bool:
        return "source_s3_uri" in self.parameters

    @property
    def local_rule_file(self) -> Path | None:
        """A custom rule's file on this host (not yet uploaded), else None."""
        src = self.parameters.get("source_s3_uri")
        return Path(src) if src and "://" not in src and not self.rule_file_in_image else None


@dataclass(frozen=True)
class ProfilerSpec:
    profiler_output: str
    interval_ms: int
    parameters: Mapping[str, str]
    disabled: bool

    @property
    def sampled(self) -> bool:
        """Whether the platform samples system metrics (SageMaker: unless DisableProfiler)."""
        return not self.disabled

    def to_container_config(self, local_path: str) -> dict[str, Any]:
        """profilerconfig.json. `LocalPath` (smdebug's key, default /opt/ml/output/profiler) tells
        the hook where the platform collects framework traces: the job folder's output/profiler
        (the docker runtime rewrites it to /opt/ml/output/profiler)."""
        params = {"ProfilingIntervalInMilliseconds": str(self.interval_ms), **self.parameters, "LocalPath": local_path}
        return {"ProfilingParameters": params, "DisableProfiler": self.disabled}


@dataclass(frozen=True)
class TensorBoardSpec:
    tensorboard_output: str
    local_path: str | None


@dataclass(frozen=True)
class JobSpec:
    job_name: str
    entry_point: str  # relative to source_dir
    source_dir: Path  # the code folder; with source_s3_uri, the job's code folder once unpacked
    hyperparameters: Mapping[str, str]
    hook: HookSpec | None
    debug_rules: tuple[RuleSpec, ...]
    profiler_rules: tuple[RuleSpec, ...]
    profiler: ProfilerSpec | None
    tensorboard: TensorBoardSpec | None
    training_image: str | None
    job_output: str  # s3://bucket/prefix/<job>
    ignored_fields: tuple[str, ...] = ()
    warnings: tuple[str, ...] = field(default=())
    # the SageMaker training environment (launcher/jobdir/training_env.py)
    request_hyperparameters: Mapping[str, str] = field(default_factory=dict)  # as sent, sagemaker_* included
    channels: tuple[Channel, ...] = ()
    environment: Mapping[str, str] = field(default_factory=dict)  # the request's Environment
    instance_type: str = "local"
    source_s3_uri: str | None = None  # an s3:// sourcedir.tar.gz, unpacked into the job's code folder
    model_output: str = ""  # <OutputDataConfig.S3OutputPath or the job's output base>/<job>/output
    stopping: StoppingCondition = field(default_factory=StoppingCondition)
    containers: ContainerSettings = field(default_factory=ContainerSettings)  # network isolation, encryption

    @property
    def model_artifacts(self) -> str:
        """Where /opt/ml/model is published: SageMaker's `<S3OutputPath>/<job>/output/model.tar.gz`."""
        return f"{self.model_output}/model.tar.gz"

    def training_environment(self) -> TrainingEnvironment:
        return TrainingEnvironment(self.job_name, self.entry_point, tuple(self.request_hyperparameters.items()),
                                   self.channels, self.instance_type)

    def input_uris(self) -> tuple[str, ...]:
        """The S3 objects or prefixes this job reads: the source tarball, S3 channels, custom rule files."""
        uris = [self.source_s3_uri] + [c.source for c in self.channels]
        uris += [r.parameters.get("source_s3_uri") for r in self.debug_rules + self.profiler_rules]
        return tuple(u for u in uris if u and u.startswith("s3://"))

    @property
    def debug_output(self) -> str:
        return f"{self.job_output}/debug-output"

    @property
    def profiler_output(self) -> str:
        """`<ProfilerConfig.S3OutputPath>/<job>/profiler-output`; without a ProfilerConfig, where
        the profiler rules' outputs are (`rule-output/` beside it)."""
        if self.profiler is not None:
            return self.profiler.profiler_output
        if self.profiler_rules:
            return self.profiler_rules[0].output.rsplit("/rule-output/", 1)[0] + "/profiler-output"
        return f"{self.job_output}/profiler-output"

    def rule_code_uri(self, rule: RuleSpec) -> str:
        """Where a local custom rule file goes: `<job output>/rule-code/<RuleConfigurationName>/<file>`."""
        path = rule.local_rule_file
        if path is None:
            raise ValueError(f"rule {rule.name} has no local rule file")
        return f"{self.job_output}/rule-code/{rule.name}/{path.name}"

    def with_uploaded_rule_code(self, upload: Callable[[Path, str], None]) -> JobSpec:
        """Upload each local custom rule file (`upload(path, s3_uri)`, as the SageMaker SDK does
        before CreateTrainingJob) and return the spec whose `source_s3_uri`s name the uploads, so
        that evaluators anywhere (containers cannot see this host's files) download them."""
        def uploaded(rules: tuple[RuleSpec, ...]) -> tuple[RuleSpec, ...]:
            out = []
            for rule in rules:
                if rule.local_rule_file is not None:
                    uri = self.rule_code_uri(rule)
                    upload(rule.local_rule_file, uri)
                    rule = replace(rule, parameters={**rule.parameters, "source_s3_uri": uri})
                out.append(rule)
            return tuple(out)

        return replace(self, debug_rules=uploaded(self.debug_rules), profiler_rules=uploaded(self.profiler_rules))

    @classmethod
    def from_request(
        cls,
        request: Mapping[str, Any],
        *,
        base_dir: Path | None = None,
        now: datetime | None = None,
        check_rule_names: bool = True,
        default_output_path: str = DEFAULT_S3_OUTPUT_PATH,
    ) -> JobSpec:
        """Parse and validate a CreateTrainingJob-shaped request.

        `base_dir` resolves relative paths (the spec file's folder); `default_output_path` is used
        when DebugHookConfig.S3OutputPath is absent; `check_rule_names` asks the evaluator's registry.
        """
        now = now or datetime.now(timezone.utc)
        return _parse(request, base_dir or Path.cwd(), now, check_rule_names, default_output_path)


MAX_SPEC_BYTES = 10 * 1024 * 1024  # a CreateTrainingJob request is far smaller; bigger is not a spec
MAX_SPEC_DEPTH = 32  # the deepest request field is ~6 levels down
MAX_SPEC_NODES = 100_000  # also bounds YAML aliases that expand exponentially ("billion laughs")


def load_request(path: Path) -> dict[str, Any]:
    """Read a request from a JSON or YAML file (YAML is a superset; `.json` gets JSON's messages).

    Any bytes give one SpecError naming the file: not UTF-8, malformed, nested deeper than a
    request is, or too large."""
    kind = "JSON" if path.suffix == ".json" else "YAML"
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_SPEC_BYTES + 1)
    except OSError as e:
        raise SpecError(str(path), f"cannot read the job spec: {e.strerror or e}") from e
    if len(raw) > MAX_SPEC_BYTES:
        raise SpecError(str(path), f"is larger than {MAX_SPEC_BYTES // 2**20} MiB; not a job spec")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SpecError(str(path), f"not UTF-8 text (byte {e.start}: {raw[e.start:e.start + 1]!r}); "
                                   f"the job spec must be {kind}") from None
    try:
        data = json.loads(text) if kind == "JSON" else yaml.safe_load(text)
    except RecursionError:  # the parsers recurse per level: ours is the clearer message
        raise SpecError(str(path), f"nests deeper than {MAX_SPEC_DEPTH} levels; not a job spec") from None
    except (ValueError, yaml.YAMLError) as e:
        detail = " ".join(str(e).split())
        raise SpecError(str(path), f"malformed {kind}: {detail}") from e
    _check_shape(data, path)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SpecError(str(path), f"the job spec must be a map of request fields, got {type(data).__name__}")
    return data


def _check_shape(data: Any, path: Path) -> None:
    """Depth and size limits, checked without recursion (the parsed value may be deep or aliased)."""
    stack: list[tuple[Any, int]] = [(data, 0)]
    nodes = 0
    while stack:
        value, depth = stack.pop()
        nodes += 1
        if depth > MAX_SPEC_DEPTH:
            raise SpecError(str(path), f"nests deeper than {MAX_SPEC_DEPTH} levels; not a job spec")
        if nodes > MAX_SPEC_NODES:
            raise SpecError(str(path), f"has more than {MAX_SPEC_NODES} values (YAML aliases count each time "
                                       "they are used); not a job spec")
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)


def _or(value: Any, default: Any) -> Any:
    """`value` unless the field is absent (None): a present but empty or wrong value is an error."""
    return default if value is None else value


def default_job_name(now: datetime) -> str:
    return "sdlocal-" + now.strftime("%Y-%m-%d-%H-%M-%S-") + f"{now.microsecond // 1000:03d}"


def _parse(
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
    entry_point = req.get("EntryPoint") or (decode_sdk_hyperparameter(sdk_program) if sdk_program else None)
    if not entry_point or not isinstance(entry_point, str):
        raise SpecError("EntryPoint", "required: the training script (or HyperParameters.sagemaker_program)")
    check_entry_point(entry_point, source_dir, source_uri is None)

    algo = as_mapping(req.get("AlgorithmSpecification"), "AlgorithmSpecification")
    optional_str(algo.get("TrainingImage"), "AlgorithmSpecification.TrainingImage")
    if algo.get("TrainingInputMode", "File") not in ("File", "FastFile", "Pipe"):
        raise SpecError("AlgorithmSpecification.TrainingInputMode",
                        f"{algo['TrainingInputMode']!r} is not one of File, FastFile, Pipe")
    ignored += [f"AlgorithmSpecification.{k}" for k in algo if k not in ("TrainingImage", "TrainingInputMode")]
    channels = parse_channels(req.get("InputDataConfig"), base_dir, algo.get("TrainingInputMode", "File"),
                              ignored, warnings)
    resources = as_mapping(req.get("ResourceConfig"), "ResourceConfig")
    ignored += [f"ResourceConfig.{k}" for k in resources if k not in ("InstanceType", "InstanceCount")]
    instance_type = parse_instance_type(resources, warnings)
    hook_req = as_mapping(req.get("DebugHookConfig"), "DebugHookConfig")
    ignored += [f"DebugHookConfig.{k}" for k in hook_req if k not in _HOOK_FIELDS]
    out_base = s3_base(_or(hook_req.get("S3OutputPath"), default_output), "DebugHookConfig.S3OutputPath")
    job_output = f"{out_base}/{job}"
    data_out = as_mapping(req.get("OutputDataConfig"), "OutputDataConfig")
    ignored += [f"OutputDataConfig.{k}" for k in data_out if k != "S3OutputPath"]
    model_base = s3_base(_or(data_out.get("S3OutputPath"), out_base), "OutputDataConfig.S3OutputPath")

    debug_rules = _rules(req, "DebugRuleConfigurations", job_output, "debugger", base_dir, ignored, warnings)
    prof_req = as_mapping(req.get("ProfilerConfig"), "ProfilerConfig")
    prof_base = s3_base(_or(prof_req.get("S3OutputPath"), out_base), "ProfilerConfig.S3OutputPath")
    profiler_rules = _rules(
        req, "ProfilerRuleConfigurations", f"{prof_base}/{job}", "profiler", base_dir, ignored, warnings
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
        job_name=job, entry_point=entry_point, source_dir=source_dir, hyperparameters=hyperparameters,
        hook=hook, debug_rules=debug_rules, profiler_rules=profiler_rules, profiler=profiler, tensorboard=tb,
        training_image=algo.get("TrainingImage"), job_output=job_output,
        ignored_fields=tuple(dict.fromkeys(ignored)), warnings=tuple(warnings),
        request_hyperparameters=raw_hp, channels=channels, environment=parse_environment(req.get("Environment")),
        instance_type=instance_type, source_s3_uri=source_uri,
        model_output=f"{model_base}/{job}/output",
        stopping=parse_stopping_condition(req.get("StoppingCondition")), containers=parse_container_settings(req),
    )


def _rules(
    req: Mapping[str, Any], key: str, job_output: str, kind: str, base_dir: Path,
    ignored: list[str], warnings: list[str],
) -> tuple[RuleSpec, ...]:
    entries = as_list(req.get(key), key)
    if len(entries) > MAX_RULES:
        raise SpecError(key, f"has {len(entries)} rules; the maximum is {MAX_RULES}")
    rules = []
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
    return tuple(rules)


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
