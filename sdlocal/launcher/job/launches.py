"""What a job starts, built from its spec: one evaluator launch per rule (the evaluator contract,
evaluator/contract.py), and the checks of what a runtime can honour (the training's launches, one
per host: launcher/job/hosts.py)."""
from __future__ import annotations

from collections.abc import Callable

from sdlocal.evaluator.rule import RuleKind
from sdlocal.launcher.errors import JobError
from sdlocal.launcher.job.model import RunOptions
from sdlocal.launcher.jobdir.folder import JobDir
from sdlocal.launcher.runtime import RuleLaunch
from sdlocal.launcher.spec.model import JobSpec, RuleSpec

Env = tuple[tuple[str, str], ...]


def check_container_settings(spec: JobSpec, isolates_network: bool, echo: Callable[[str], None]) -> None:
    """EnableNetworkIsolation honoured (a runtime that can cut the training off the network) or
    refused; EnableInterContainerTrafficEncryption said to hold trivially (launcher/spec/job_settings.py)."""
    settings = spec.containers
    if settings.network_isolation and not isolates_network:
        raise JobError("EnableNetworkIsolation: a training process of this host cannot be cut off the network; "
                       "run the job with --runtime docker (its training container then has no network)")
    if settings.network_isolation:
        echo("EnableNetworkIsolation: the training container has no network (the launcher stages the "
             "inputs and uploads the outputs)")
    if settings.traffic_encryption and not spec.multi_host:
        echo("EnableInterContainerTrafficEncryption: sdlocal runs one training container: there is no "
             "traffic between training instances to encrypt")
    elif settings.traffic_encryption:
        echo("EnableInterContainerTrafficEncryption: the hosts' traffic stays on this machine (its loopback, or "
             "the job's Docker network) and is not encrypted")


def rule_launch(spec: JobSpec, rule: RuleSpec, job_dir: JobDir, options: RunOptions, env: Env) -> RuleLaunch:
    if rule.kind == RuleKind.PROFILER:
        profiler_output: str | None = spec.profiler_output
    else:
        profiler_output = spec.profiler.profiler_output if spec.profiler else None
    return RuleLaunch(
        job_name=spec.job_name, rule_name=rule.name, rule_parameters=tuple(rule.parameters.items()),
        debug_output=spec.debug_output, rule_output=rule.output, log_path=job_dir.rule_log(rule.name),
        profiler_output=profiler_output, poll_interval_s=options.poll_interval_s,
        collections_timeout_s=options.collections_timeout_s, image=rule.image, env=env,
        instance_type=rule.instance_type, rule_timeout_s=options.rule_timeout_s,
    )
