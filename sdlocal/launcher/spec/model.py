"""The job spec: the CreateTrainingJob request (as the SageMaker Python SDK v2 sends it) + sdlocal's
`EntryPoint`/`SourceDir`, as frozen dataclasses. `spec_from_request` (launcher/spec/parse.py) is the one
boundary that parses and validates a request; files are read by launcher/spec/load.py.

Every problem raises one `SpecError` naming the field, with the service's limits and wording.
Fields that matter only on SageMaker (RoleArn, ResourceConfig, ...) are accepted and listed in
`JobSpec.ignored_fields`, reported once by the caller.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sdlocal.evaluator.rule import RuleKind
from sdlocal.launcher.spec.algorithm import BuiltinAlgorithm, ContainerCommand, MetricDefinition
from sdlocal.launcher.spec.collection_configs import (
    CollectionConfig,
)
from sdlocal.launcher.spec.distribution import Distribution
from sdlocal.launcher.spec.inputs import (
    Channel,
)
from sdlocal.launcher.spec.job_settings import (
    ContainerSettings,
    StoppingCondition,
)

DEFAULT_S3_OUTPUT_PATH = "s3://sdlocal/jobs"



def host_names(count: int) -> tuple[str, ...]:
    """algo-1 .. algo-`count`, as SageMaker names a job's hosts."""
    return tuple(f"algo-{i}" for i in range(1, max(count, 1) + 1))

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
    kind: RuleKind
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
    instance_count: int = 1  # ResourceConfig.InstanceCount: the hosts algo-1..algo-N
    distribution: Distribution = field(default_factory=Distribution)  # how each host launches its processes
    source_s3_uri: str | None = None  # an s3:// sourcedir.tar.gz, unpacked into the job's code folder
    model_output: str = ""  # <OutputDataConfig.S3OutputPath or the job's output base>/<job>/output
    stopping: StoppingCondition = field(default_factory=StoppingCondition)
    containers: ContainerSettings = field(default_factory=ContainerSettings)  # network isolation, encryption
    # what runs when it is not the script (launcher/spec/algorithm.py): SageMaker's XGBoost algorithm
    # (its image URI, no script), or the request's ContainerEntrypoint + ContainerArguments
    algorithm: BuiltinAlgorithm | None = None
    command: ContainerCommand | None = None
    metric_definitions: tuple[MetricDefinition, ...] = ()  # the algorithm's, then the request's
    code_in_job_folder: bool = False  # no script and no SourceDir: /opt/ml/code is the job's own code folder

    @property
    def script_mode(self) -> bool:
        """The SDK's script mode: `entry_point` run by the training toolkit (with the zero-code hook)."""
        return self.algorithm is None and self.command is None

    @property
    def model_artifacts(self) -> str:
        """Where /opt/ml/model is published: SageMaker's `<S3OutputPath>/<job>/output/model.tar.gz`."""
        return f"{self.model_output}/model.tar.gz"

    @property
    def hosts(self) -> tuple[str, ...]:
        """algo-1 .. algo-N, as SageMaker names a job's hosts."""
        return host_names(self.instance_count)

    @property
    def multi_host(self) -> bool:
        return self.instance_count > 1

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


