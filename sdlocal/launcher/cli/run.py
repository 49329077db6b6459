"""`sdlocal run`: a training job with its rules, like CreateTrainingJob on SageMaker (the job itself
runs through launcher/job/run.py, the path `sdlocal serve` takes too)."""
from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import click

from sdlocal.launcher.cli import options
from sdlocal.launcher.cli.output import print_statuses, sdk_shape
from sdlocal.launcher.spec.overrides import Overrides, group_rule_flags, rule_options_in_order
from sdlocal.launcher.spec.parse import spec_from_request


class OrderedCommand(click.Command):
    """Keeps the raw arguments: `--rule-param` applies to the `--rule` before it."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["sdlocal.args"] = list(args)
        return super().parse_args(ctx, args)


@click.command(cls=OrderedCommand)
@click.argument("spec_file", required=False, type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--entry-point", help="Training script, relative to the source directory.")
@click.option("--source-dir", type=click.Path(file_okay=False, exists=True, path_type=Path),
              help="Folder of the training code (default: the spec file's folder, else the current one).")
@click.option("--job-name", help="TrainingJobName (default: sdlocal-<timestamp>).")
@click.option("--hyperparameter", "-p", "hyperparameters", multiple=True, callback=options.kv, metavar="K=V",
              help="Passed to the script as --K V. Repeatable.")
@click.option("--rule", "rules", multiple=True, metavar="NAME", help="A built-in Debugger rule. Repeatable.")
@click.option("--recommended-rules", is_flag=True,
              help="The recommended rule set (listed by `sdlocal rules`): a DebugRuleConfigurations entry "
                   "RecommendedRules, one rule each; a --rule of the set keeps its own parameters.")
@click.option("--rule-param", "rule_params", multiple=True, metavar="K=V",
              help="A RuleParameter of the closest --rule/--custom-rule BEFORE it. Repeatable.")
@click.option("--custom-rule", "custom_rules", multiple=True, metavar="FILE.py:CLASS",
              help="A custom rule class from a file (its parameters: the --rule-param after it). Repeatable.")
@click.option("--hook-param", "hook_params", multiple=True, callback=options.kv, metavar="K=V",
              help="DebugHookConfig.HookParameters entry, e.g. save_interval=10. Repeatable.")
@click.option("--collection", "collections", multiple=True, callback=options.collections, metavar="NAME[:K=V,...]",
              help="A collection to save, optionally with CollectionParameters. Repeatable.")
@click.option("--channel", "channels", multiple=True, callback=options.kv, metavar="NAME=URI",
              help="An InputDataConfig channel: an s3:// prefix or a local path, seen by the script at "
                   "/opt/ml/input/data/NAME (SM_CHANNEL_NAME). Repeatable.")
@click.option("--s3-output-path", metavar="S3_URI", help="Where the job's outputs go (default s3://sdlocal/jobs).")
@options.endpoint_option
@options.s3_option
@options.work_dir_option
@click.option("--overwrite", is_flag=True, help="Replace the outputs of an earlier job with the same name.")
@options.rule_timeout_option
@click.option("--rule-finish-timeout", type=float, default=600.0, show_default=True, callback=options.positive_seconds,
              help="Seconds the evaluators may run on after training ended; those still running then end Error.")
@click.option("--poll-interval", type=float, default=1.0, show_default=True, callback=options.positive_seconds,
              help="Evaluators' polling interval (s).")
@click.option("--runtime", type=click.Choice(["process", "docker", "auto"]), envvar="SDLOCAL_RUNTIME",
              default="auto", show_default=True,
              help="Where training and evaluators run: subprocesses, containers, or docker when its engine "
                   "answers and the images exist (env SDLOCAL_RUNTIME).")
@click.option("--keep-containers", is_flag=True, help="docker: leave the job's containers and network after it ends.")
@click.option("--rule-memory", metavar="SIZE",
              help="docker: memory limit of each evaluator container (default: its InstanceType's, else 2g).")
@click.option("--rule-cpus", metavar="N",
              help="docker: CPU limit of each evaluator container (default: its InstanceType's, else 1).")
@options.host_limit_options
@click.option("--training-user", metavar="UID[:GID]|root",
              help="docker: the training container's user (default: you, or uid 1000 when sdlocal runs as root; "
                   "`root` for an image that needs it).")
@click.option("--json", "as_json", is_flag=True,
              help="Print the rule statuses as JSON in the SDK's rule_job_summary() shape (as `summary --json`).")
@click.option("--quiet", "-q", is_flag=True,
              help="Show only the launcher's lines, not the training's log nor the live status line (for scripts).")
@click.pass_context
def run(ctx: click.Context, spec_file: Path | None, entry_point: str | None, source_dir: Path | None,
        job_name: str | None, hyperparameters: tuple[tuple[str, str], ...], rules: tuple[str, ...],
        recommended_rules: bool, rule_params: tuple[str, ...], custom_rules: tuple[str, ...], hook_params: tuple[tuple[str, str], ...],
        collections: Any, channels: tuple[tuple[str, str], ...], s3_output_path: str | None,
        s3_endpoint_url: str | None, s3_choice: str | None, work_dir: Path | None, overwrite: bool,
        rule_timeout: float, rule_finish_timeout: float, poll_interval: float, runtime: str,
        keep_containers: bool, rule_memory: str | None, rule_cpus: str | None, host_cpus: str | None,
        host_memory: str | None, training_user: str | None, as_json: bool, quiet: bool) -> None:
    """Run a training job with its Debugger rules, like CreateTrainingJob on SageMaker.

    SPEC_FILE is a CreateTrainingJob request (JSON or YAML, e.g. the body the SageMaker Python SDK
    builds) plus `EntryPoint` and `SourceDir`; flags build a spec or extend it. Example:

      sdlocal run --entry-point train.py -p lr=0.1 --rule VanishingGradient --rule-param threshold=1e-6
      sdlocal run --entry-point train.py --recommended-rules
    """
    from sdlocal.launcher.job.model import RunOptions
    from sdlocal.launcher.job.record import describe_outcome
    from sdlocal.launcher.job.run import run_job, stop_on_signals
    from sdlocal.launcher.runtime import ProcessRuntime
    from sdlocal.launcher.runtime.docker_config import HostLimits, RuleLimits
    from sdlocal.launcher.runtime.docker_config import training_user as parse_training_user
    from sdlocal.launcher.runtime.selection import select_runtime
    from sdlocal.launcher.spec.load import load_request
    from sdlocal.launcher.spec.model import DEFAULT_S3_OUTPUT_PATH
    from sdlocal.launcher.spec.values import is_debugger_rule_image

    try:
        rule_flags = group_rule_flags(rule_options_in_order(ctx.meta.get("sdlocal.args", [])))
    except ValueError as e:
        raise click.UsageError(str(e), ctx=ctx) from e
    if recommended_rules:
        from sdlocal.evaluator.recommended import NAME as RECOMMENDED
        from sdlocal.launcher.spec.overrides import RuleFlag

        rule_flags = (*rule_flags, RuleFlag(RECOMMENDED))
    overrides = Overrides(entry_point=entry_point, source_dir=source_dir, job_name=job_name,
                          hyperparameters=hyperparameters, rules=rule_flags, hook_params=hook_params,
                          collections=collections, s3_output_path=s3_output_path, channels=channels)
    request = overrides.apply(load_request(spec_file) if spec_file else {})
    spec = spec_from_request(request, base_dir=spec_file.parent if spec_file else Path.cwd(),
                                default_output_path=s3_output_path or DEFAULT_S3_OUTPUT_PATH)
    echo = lambda line: click.echo(line, err=True)  # noqa: E731
    if spec.ignored_fields:
        echo(f"Ignored (SageMaker-only) fields: {', '.join(spec.ignored_fields)}")
    for warning in spec.warnings:
        echo(f"Warning: {warning}")
    run_options = RunOptions(poll_interval_s=poll_interval, rule_finish_timeout_s=rule_finish_timeout,
                             rule_timeout_s=rule_timeout, overwrite=overwrite)
    all_rules = spec.debug_rules + spec.profiler_rules
    endpoint = options.endpoint(s3_endpoint_url, s3_choice)  # refused before anything is started
    chosen = select_runtime(runtime, rule_images=[r.image for r in all_rules], training_image=spec.training_image,
                            limits=RuleLimits.from_flags(rule_memory, rule_cpus) if rule_memory or rule_cpus else None,
                            keep=keep_containers, training_user=parse_training_user(training_user), echo=echo,
                            host_limits=HostLimits.from_flags(host_memory, host_cpus),
                            distribution=spec.distribution.kind)
    if isinstance(chosen, ProcessRuntime):
        for rule in all_rules:
            if not is_debugger_rule_image(rule.image):
                echo(f"Warning: {rule.name}: RuleEvaluatorImage {rule.image} is not run by the process runtime; "
                     "using the built-in evaluator")
    stop = threading.Event()
    job_dir = options.job_dir(spec.job_name, work_dir)
    live = None
    if not quiet:  # the training's lines as they are written, the status line on a terminal
        from sdlocal.launcher.cli.follow import LiveOutput

        live = LiveOutput([(host, job_dir.training_log(host)) for host in spec.hosts], job_dir.tensors,
                          write=lambda text: click.echo(text, nl=False, err=True),
                          terminal=sys.stderr.isatty())
        echo = live.echo
        live.start()
    try:
        with stop_on_signals(stop):  # also while cleaning up: a second Ctrl-C must not skip the cleanup
            result = run_job(spec, job_dir=job_dir, endpoint=endpoint, runtime=chosen, options=run_options,
                             stop=stop, echo=echo, on_lifecycle=live.attach if live is not None else None)
    finally:
        if live is not None:
            live.finish()
    echo = lambda line: click.echo(line, err=True)  # noqa: E731
    echo(describe_outcome(result.job_name, {"TrainingJobStatus": result.training_status,
                                            "SecondaryStatus": result.secondary_status,
                                            "FailureReason": result.failure_reason}) or "")
    print_statuses(sdk_shape(result.statuses, result.job_name) if as_json else result.statuses, as_json)
    if result.stopped:
        ctx.exit(130)
    if result.training_failed:
        ctx.exit(1)
