"""`sdlocal`: the command line. Thin: each command parses, calls the library, formats.
Errors become one `Error: ...` line (exit 1) in ONE place, `_Cli.invoke`; `--debug` shows the traceback."""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import click

from sdlocal.launcher.errors import LauncherError
from sdlocal.launcher.spec.overrides import (
    Overrides,
    group_rule_flags,
    parse_collection,
    parse_kv,
    rule_options_in_order,
)


def _one_line(e: BaseException) -> str:
    """The error as one line naming its culprit: ours (LauncherError, TrialError, ...) already name
    the field, file or S3 key; S3 and Docker errors are named after their service; anything else
    is unexpected and keeps its type (the traceback is one `--debug` away)."""
    from botocore.exceptions import BotoCoreError, ClientError

    from sdlocal.evaluator.errors import EvaluatorError
    from sdlocal.hook.errors import HookError
    from sdlocal.trial.errors import TrialError

    message = " ".join(str(e).split()) or type(e).__name__
    if isinstance(e, BotoCoreError | ClientError):
        return f"S3: {message}"  # name the culprit: the S3 endpoint, not sdlocal
    if type(e).__module__.startswith("docker"):
        return f"Docker: {message}"
    if isinstance(e, LauncherError | TrialError | EvaluatorError | HookError):
        return message
    if isinstance(e, OSError | RecursionError | MemoryError | UnicodeError):
        return f"{type(e).__name__}: {message}"  # OSError's text names its path
    return f"{type(e).__name__}: {message} (unexpected: `sdlocal --debug ...` shows the traceback)"


class _Cli(click.Group):
    """The CLI's one error boundary: every exception of every command (and of the `images` group)
    becomes one `Error: ...` line and exit status 1; `--debug` re-raises it with its traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise  # click's own: usage errors (exit 2), ctx.exit(n), Ctrl-C at a prompt
        except Exception as e:
            if ctx.params.get("debug"):
                raise
            raise click.ClickException(_one_line(e)) from e


class _OrderedCommand(click.Command):
    """Keeps the raw arguments: `--rule-param` applies to the `--rule` before it."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["sdlocal.args"] = list(args)
        return super().parse_args(ctx, args)


def _kv(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    try:
        return tuple(parse_kv(v) for v in values)
    except ValueError as e:
        raise click.BadParameter(str(e), ctx=ctx, param=param) from e


def _collections(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> Any:
    try:
        return tuple(parse_collection(v) for v in values)
    except ValueError as e:
        raise click.BadParameter(str(e), ctx=ctx, param=param) from e


_endpoint_option = click.option(
    "--s3-endpoint-url", metavar="URL",
    help="S3 endpoint (MinIO, LocalStack, moto). Default: AWS_ENDPOINT_URL_S3, else AWS if you have "
         "credentials, else the embedded S3 server.")
def _positive_seconds(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """Timeouts and intervals: a number of seconds > 0 (inf: no limit), else one usage error."""
    if value is not None and not value > 0:  # also NaN
        raise click.BadParameter(f"{value:g} is not a number of seconds > 0", ctx=ctx, param=param)
    return value


# evaluator.watchdog.DEFAULT_RULE_TIMEOUT_S (not imported here: `sdlocal --help` stays quick; a test
# keeps the two equal)
DEFAULT_RULE_TIMEOUT_S = 300.0
_rule_timeout_option = click.option(
    "--rule-timeout", type=float, default=DEFAULT_RULE_TIMEOUT_S, show_default=True, callback=_positive_seconds,
    help="Seconds one call of a rule's own code may run: the import of a custom rule file, its constructor, "
         "one step's invoke_at_step. Past it the rule ends Error (waiting for data does not count).")
_work_dir_option = click.option(
    "--work-dir", type=click.Path(file_okay=False, path_type=Path),
    help="The job directory (default $SDLOCAL_HOME/jobs/<job>, SDLOCAL_HOME defaults to ~/.sdlocal).")


def _job_name(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """JOB_NAME of logs/stop/summary: a TrainingJobName, never a path (`../x` would leave the jobs folder)."""
    from sdlocal.launcher.spec.values import check_job_name

    try:
        return check_job_name(value, "JOB_NAME")
    except LauncherError as e:
        raise click.BadParameter(str(e).removeprefix("JOB_NAME: "), ctx=ctx, param=param) from e


def _endpoint(flag: str | None) -> Any:
    from sdlocal.launcher.s3.endpoint import resolve_endpoint

    return resolve_endpoint(flag)


def _job_dir(job_name: str, work_dir: Path | None) -> Any:
    from sdlocal.launcher.jobdir.folder import JobDir
    from sdlocal.launcher.s3.endpoint import sdlocal_home

    return JobDir((work_dir or sdlocal_home() / "jobs" / job_name).resolve())


@click.group(cls=_Cli, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show the full traceback of errors.")
def cli(debug: bool) -> None:
    """sdlocal: Amazon SageMaker Debugger on your own machine (hook, rule evaluators, embedded S3)."""


@cli.command(cls=_OrderedCommand)
@click.argument("spec_file", required=False, type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--entry-point", help="Training script, relative to the source directory.")
@click.option("--source-dir", type=click.Path(file_okay=False, exists=True, path_type=Path),
              help="Folder of the training code (default: the spec file's folder, else the current one).")
@click.option("--job-name", help="TrainingJobName (default: sdlocal-<timestamp>).")
@click.option("--hyperparameter", "-p", "hyperparameters", multiple=True, callback=_kv, metavar="K=V",
              help="Passed to the script as --K V. Repeatable.")
@click.option("--rule", "rules", multiple=True, metavar="NAME", help="A built-in Debugger rule. Repeatable.")
@click.option("--rule-param", "rule_params", multiple=True, metavar="K=V",
              help="A RuleParameter of the closest --rule/--custom-rule BEFORE it. Repeatable.")
@click.option("--custom-rule", "custom_rules", multiple=True, metavar="FILE.py:CLASS",
              help="A custom rule class from a file (its parameters: the --rule-param after it). Repeatable.")
@click.option("--hook-param", "hook_params", multiple=True, callback=_kv, metavar="K=V",
              help="DebugHookConfig.HookParameters entry, e.g. save_interval=10. Repeatable.")
@click.option("--collection", "collections", multiple=True, callback=_collections, metavar="NAME[:K=V,...]",
              help="A collection to save, optionally with CollectionParameters. Repeatable.")
@click.option("--channel", "channels", multiple=True, callback=_kv, metavar="NAME=URI",
              help="An InputDataConfig channel: an s3:// prefix or a local path, seen by the script at "
                   "/opt/ml/input/data/NAME (SM_CHANNEL_NAME). Repeatable.")
@click.option("--s3-output-path", metavar="S3_URI", help="Where the job's outputs go (default s3://sdlocal/jobs).")
@_endpoint_option
@_work_dir_option
@click.option("--overwrite", is_flag=True, help="Replace the outputs of an earlier job with the same name.")
@_rule_timeout_option
@click.option("--rule-finish-timeout", type=float, default=600.0, show_default=True, callback=_positive_seconds,
              help="Seconds the evaluators may run on after training ended; those still running then end Error.")
@click.option("--poll-interval", type=float, default=1.0, show_default=True, callback=_positive_seconds,
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
@click.option("--training-user", metavar="UID[:GID]|root",
              help="docker: the training container's user (default: you, or uid 1000 when sdlocal runs as root; "
                   "`root` for an image that needs it).")
@click.option("--json", "as_json", is_flag=True,
              help="Print the rule statuses as JSON in the SDK's rule_job_summary() shape (as `summary --json`).")
@click.pass_context
def run(ctx: click.Context, spec_file: Path | None, entry_point: str | None, source_dir: Path | None,
        job_name: str | None, hyperparameters: tuple[tuple[str, str], ...], rules: tuple[str, ...],
        rule_params: tuple[str, ...], custom_rules: tuple[str, ...], hook_params: tuple[tuple[str, str], ...],
        collections: Any, channels: tuple[tuple[str, str], ...], s3_output_path: str | None, s3_endpoint_url: str | None, work_dir: Path | None,
        overwrite: bool, rule_timeout: float, rule_finish_timeout: float, poll_interval: float, runtime: str,
        keep_containers: bool,
        rule_memory: str | None, rule_cpus: str | None, training_user: str | None, as_json: bool) -> None:
    """Run a training job with its Debugger rules, like CreateTrainingJob on SageMaker.

    SPEC_FILE is a CreateTrainingJob request (JSON or YAML, e.g. the body the SageMaker Python SDK
    builds) plus `EntryPoint` and `SourceDir`; flags build a spec or extend it. Example:

      sdlocal run --entry-point train.py -p lr=0.1 --rule VanishingGradient --rule-param threshold=1e-6
    """
    from sdlocal.launcher.job.model import describe_outcome
    from sdlocal.launcher.job.registry import StopWatcher, register, unregister
    from sdlocal.launcher.job.run import RunOptions, run_job, stop_on_signals
    from sdlocal.launcher.runtime import ProcessRuntime
    from sdlocal.launcher.runtime.docker_config import RuleLimits
    from sdlocal.launcher.runtime.docker_config import training_user as parse_training_user
    from sdlocal.launcher.runtime.selection import select_runtime
    from sdlocal.launcher.s3.endpoint import sdlocal_home
    from sdlocal.launcher.spec.model import DEFAULT_S3_OUTPUT_PATH, JobSpec, load_request
    from sdlocal.launcher.spec.values import is_debugger_rule_image

    try:
        rule_flags = group_rule_flags(rule_options_in_order(ctx.meta.get("sdlocal.args", [])))
    except ValueError as e:
        raise click.UsageError(str(e), ctx=ctx) from e
    overrides = Overrides(entry_point=entry_point, source_dir=source_dir, job_name=job_name,
                          hyperparameters=hyperparameters, rules=rule_flags, hook_params=hook_params,
                          collections=collections, s3_output_path=s3_output_path, channels=channels)
    request = overrides.apply(load_request(spec_file) if spec_file else {})
    spec = JobSpec.from_request(request, base_dir=spec_file.parent if spec_file else Path.cwd(),
                                default_output_path=s3_output_path or DEFAULT_S3_OUTPUT_PATH)
    if spec.ignored_fields:
        click.echo(f"Ignored (SageMaker-only) fields: {', '.join(spec.ignored_fields)}", err=True)
    for warning in spec.warnings:
        click.echo(f"Warning: {warning}", err=True)
    options = RunOptions(poll_interval_s=poll_interval, rule_timeout_s=rule_finish_timeout,
                         rule_call_timeout_s=rule_timeout, overwrite=overwrite)
    echo = lambda line: click.echo(line, err=True)  # noqa: E731
    all_rules = spec.debug_rules + spec.profiler_rules
    endpoint = _endpoint(s3_endpoint_url)  # a bad endpoint is refused before anything is started
    chosen = select_runtime(runtime, rule_images=[r.image for r in all_rules], training_image=spec.training_image,
                            limits=RuleLimits.from_flags(rule_memory, rule_cpus) if rule_memory or rule_cpus else None,
                            keep=keep_containers, training_user=parse_training_user(training_user), echo=echo)
    if isinstance(chosen, ProcessRuntime):
        for rule in all_rules:
            if not is_debugger_rule_image(rule.image):
                echo(f"Warning: {rule.name}: RuleEvaluatorImage {rule.image} is not run by the process runtime; "
                     "using the built-in evaluator")
    job_dir = _job_dir(spec.job_name, work_dir)
    home = sdlocal_home()
    stop = threading.Event()
    watcher = StopWatcher(job_dir.root, stop)
    with stop_on_signals(stop):  # also while cleaning up: a second Ctrl-C must not skip the cleanup
        try:
            register(home, spec.job_name, job_dir.root)
            watcher.start()
            result = run_job(spec, job_dir=job_dir, endpoint=endpoint, runtime=chosen,
                             options=options, stop=stop, echo=echo)
        finally:
            watcher.close()
            chosen.close()
            unregister(home, spec.job_name)
    echo(describe_outcome(result.job_name, {"TrainingJobStatus": result.training_status,
                                            "SecondaryStatus": result.secondary_status,
                                            "FailureReason": result.failure_reason}) or "")
    _print_statuses(_sdk_shape(result.statuses, result.job_name) if as_json else result.statuses, as_json)
    if result.stopped:
        ctx.exit(130)
    if result.training_failed:
        ctx.exit(1)


@cli.command()
@click.argument("job_name", callback=_job_name)
@click.option("--s3-output-path", metavar="S3_URI",
              help="The job's S3OutputPath (default: from the local job record, else s3://sdlocal/jobs).")
@_endpoint_option
@_work_dir_option
@click.option("--json", "as_json", is_flag=True,
              help="Print the statuses as JSON in the SDK's rule_job_summary() shape (LastModifiedTime: ISO 8601).")
def summary(job_name: str, s3_output_path: str | None, s3_endpoint_url: str | None, work_dir: Path | None,
            as_json: bool) -> None:
    """The rules' evaluation statuses of JOB_NAME (Debugger rules, then profiler rules)."""
    from sdlocal.launcher.statuses.summary import rule_job_summary, rules_of_job, training_outcome

    client = _endpoint(s3_endpoint_url).client()
    job_dir = _job_dir(job_name, work_dir).root
    refs = rules_of_job(client, job_name, output_path=s3_output_path, job_dir=job_dir)
    outcome = training_outcome(job_name, job_dir)
    if outcome:
        click.echo(outcome, err=True)
    rows = rule_job_summary(client, refs)
    _print_statuses(_sdk_shape(rows, job_name) if as_json else rows, as_json)


@cli.command()
@click.argument("job_name", callback=_job_name)
@click.option("--rule", "rule_name", metavar="NAME", help="The log of this rule's evaluator instead of training's.")
@_work_dir_option
def logs(job_name: str, rule_name: str | None, work_dir: Path | None) -> None:
    """Print the training log of JOB_NAME (or one rule evaluator's), for either runtime."""
    job_dir = _job_dir(job_name, work_dir)
    if not job_dir.root.is_dir():
        raise click.ClickException(f"unknown job {job_name}: no job folder at {job_dir.root}")
    path = job_dir.rule_log(rule_name) if rule_name else job_dir.logs / "training.log"
    if not path.is_file():
        known = sorted(p.name[len("rule-"):-len(".log")] for p in job_dir.logs.glob("rule-*.log"))
        what = f"rule {rule_name!r}" if rule_name else "training"
        raise click.ClickException(f"job {job_name} has no {what} log (rules with logs: {', '.join(known) or 'none'})")
    click.echo(path.read_text(errors="replace"), nl=False)


@cli.command()
@click.argument("job_name", callback=_job_name)
@_work_dir_option
@click.option("--timeout", type=float, default=60.0, show_default=True, callback=_positive_seconds,
              help="Seconds to wait for the running launcher to stop the job.")
def stop(job_name: str, work_dir: Path | None, timeout: float) -> None:
    """Stop a running job from another terminal (its rules end `Stopped`, as with Ctrl-C).

    With no `sdlocal run` alive for JOB_NAME, removes the job's leftover containers and network."""
    from sdlocal.launcher.job.registry import find_running, request_stop, wait_ended
    from sdlocal.launcher.s3.endpoint import sdlocal_home

    home = sdlocal_home()
    running = find_running(home, job_name)
    if running is not None:
        request_stop(running.job_dir)
        if not wait_ended(home, running, timeout):
            raise click.ClickException(f"asked job {job_name} to stop; its launcher (pid {running.pid}) "
                                       f"is still running after {timeout:g} s")
        click.echo(f"stopped job {job_name}")
        return
    removed = _remove_job_containers(job_name)
    if removed:
        click.echo(f"job {job_name} had no running launcher; removed {', '.join(removed)}")
    elif _job_dir(job_name, work_dir).root.is_dir():
        click.echo(f"job {job_name} is not running")
    else:
        raise click.ClickException(f"unknown job {job_name}: not running, no containers, no job folder")


def _remove_job_containers(job_name: str) -> list[str]:
    """Containers and networks labelled with the job (none when no Docker engine answers)."""
    try:
        import docker

        client = docker.from_env(timeout=30)
        client.ping()
    except Exception:  # noqa: BLE001 - no engine: nothing of the job can be left in it
        return []
    from sdlocal.launcher.runtime.docker import remove_run

    try:
        return remove_run(client, {"sdlocal.job": job_name})
    finally:
        client.close()


@cli.command()
@click.argument("trial")
@click.option("--rule", "rule_name", metavar="NAME", help="Built-in rule to run (see `sdlocal rules`).")
@click.option("--param", "params", multiple=True, callback=_kv, metavar="K=V", help="A RuleParameter. Repeatable.")
@click.option("--custom-rule", metavar="FILE.py:CLASS", help="Run a custom rule class from a file instead.")
@click.option("--output", "output", metavar="DIR_OR_S3",
              help="Profiler rules: the rule-output folder their reports go to "
                   "(<output>/profiler-output/profiler-reports/<Rule>.json). Default: not written.")
@_rule_timeout_option
@_endpoint_option
@click.option("--json", "as_json", is_flag=True, help="Print the final status as JSON.")
@click.pass_context
def evaluate(ctx: click.Context, trial: str, rule_name: str | None, params: tuple[tuple[str, str], ...],
             custom_rule: str | None, output: str | None, rule_timeout: float, s3_endpoint_url: str | None,
             as_json: bool) -> None:
    """Evaluate one rule on a finished job's output TRIAL (a local folder or an s3:// prefix).

    Debugger rules read a debug-output trial. Profiler rules (`sdlocal rules`, group profiler)
    read the profiler-output found at TRIAL: the folder itself, TRIAL/profiler-output (a job's
    S3 prefix), TRIAL/output/profiler (an sdlocal job folder), or the profiler-output beside a
    debug-output.

    The rule runs in an evaluator process of its own (a custom rule that exits, crashes or hangs
    ends `Error`, saying how). Exit 0 when the rule ran (IssuesFound or NoIssuesFound), 1 on
    Error, 130 when interrupted.
    """
    from sdlocal.launcher.job.evaluate import evaluate_isolated
    from sdlocal.launcher.job.run import stop_on_signals

    custom_file = None
    if custom_rule:
        custom_file, _, rule_name = custom_rule.rpartition(":")
        if not custom_file or not rule_name:
            raise click.BadParameter("expected FILE.py:CLASS", param_hint="--custom-rule")
    if not rule_name:
        raise click.UsageError("give --rule NAME or --custom-rule FILE.py:CLASS")
    uses_s3 = trial.startswith("s3://") or (output or "").startswith("s3://")
    endpoint_env = _endpoint(s3_endpoint_url).child_env() if uses_s3 else {}
    stop = threading.Event()
    with stop_on_signals(stop):
        row = evaluate_isolated(trial, rule_name, dict(params), custom_rule_file=custom_file,
                                endpoint_env=endpoint_env, rule_timeout_s=rule_timeout, stop=stop,
                                echo=lambda line: click.echo(line, err=True),
                                extra={"report_output": output} if output else None)
    _print_statuses([row], as_json)
    if row["RuleEvaluationStatus"] == "Stopped":
        ctx.exit(130)
    if row["RuleEvaluationStatus"] not in ("IssuesFound", "NoIssuesFound"):
        # the culprit (unknown rule, bad parameter, custom rule that fails to import, corrupt
        # tensor file) is in StatusDetails: say it once more on stderr as the command's error
        raise click.ClickException(str(row.get("StatusDetails") or row["RuleEvaluationStatus"]))


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print the rules as JSON.")
def rules(as_json: bool) -> None:
    """List the built-in rules (Debugger rules, then profiler rules) by group, with their parameters."""
    from sdlocal.evaluator.registry import builtin_rule_infos

    infos = builtin_rule_infos()
    if as_json:
        click.echo(json.dumps([{"name": i.name, "group": i.group, "kind": i.kind, "parameters": dict(i.parameters),
                                "default_collections": [{"CollectionName": c.name, "CollectionParameters": c.parameter_map}
                                                        for c in i.default_collections],
                                "description": i.description} for i in infos], indent=1))
        return
    width = max([len("Rule"), *(len(i.name) for i in infos)])
    gwidth = max([len("Group"), *(len(i.group) for i in infos)])
    click.echo(f"{'Rule'.ljust(width)}  {'Group'.ljust(gwidth)}  Parameters (defaults)")
    group = None
    for i in infos:
        if group is not None and i.group != group:
            click.echo("")
        group = i.group
        params = ", ".join(f"{k}={v}" if v else k for k, v in i.parameters)
        click.echo(f"{i.name.ljust(width)}  {i.group.ljust(gwidth)}  {params}".rstrip())


@cli.group()
def s3() -> None:
    """The embedded S3 server (a moto server shared by sdlocal commands)."""


@s3.command("status")
def s3_status() -> None:
    """Say whether the embedded S3 server runs, where, and what it keeps on disk."""
    from sdlocal.launcher.s3.endpoint import EmbeddedS3, sdlocal_home

    server = EmbeddedS3(sdlocal_home())
    state = server.running()
    click.echo(f"running at {state.url} (pid {state.pid})" if state else "not running")
    usage = server.usage()
    click.echo(f"data: {server.data_dir} ({usage.buckets} bucket(s), {usage.objects} object(s), "
               f"{_size(usage.bytes)}; kept across restarts)")


@s3.command("stop")
@click.option("--discard-data", is_flag=True, help="Also delete its buckets and objects (kept otherwise).")
def s3_stop(discard_data: bool) -> None:
    """Stop the embedded S3 server (its data is kept for its next start unless --discard-data)."""
    import shutil

    from sdlocal.launcher.s3.endpoint import EmbeddedS3, sdlocal_home

    server = EmbeddedS3(sdlocal_home())
    state = server.stop()
    click.echo(f"stopped the embedded S3 server at {state.url} (pid {state.pid})" if state else "not running")
    if discard_data:
        shutil.rmtree(server.data_dir, ignore_errors=True)
        click.echo(f"deleted its data ({server.data_dir})")
    elif server.data_dir.is_dir():
        click.echo(f"its data stays in {server.data_dir}")


def _size(n: int) -> str:
    if n < 1000:
        return f"{n} bytes"
    scale, unit = max(x for x in ((1e3, "KB"), (1e6, "MB"), (1e9, "GB")) if n >= x[0])
    return f"{n / scale:.1f} {unit}"


@cli.group(invoke_without_command=True)
@click.option("--port", type=click.IntRange(0, 65535), default=None,
              help="Port on 127.0.0.1 (default 8775; 0: a free one).")
@click.option("--background", is_flag=True, help="Start detached and return (stop it with `sdlocal serve stop`).")
@click.option("--runtime", type=click.Choice(["process", "docker", "auto"]), envvar="SDLOCAL_RUNTIME",
              default="auto", show_default=True, help="Where the jobs' training and evaluators run (as `run`).")
@click.pass_context
def serve(ctx: click.Context, port: int | None, background: bool, runtime: str) -> None:
    """A local SageMaker endpoint (SageMaker training API, S3, CloudWatch Logs) for SDK v2 scripts.

    Prints the exports a script needs (`eval "$(sdlocal serve --background)"`); with them an
    unchanged `PyTorch(..., rules=[...]).fit()` runs its job here, as `sdlocal run` would."""
    if ctx.invoked_subcommand is not None:
        return
    from sdlocal.launcher.job.run import stop_on_signals
    from sdlocal.launcher.s3.endpoint import sdlocal_home
    from sdlocal.launcher.serve.control import (
        DEFAULT_PORT,
        exports,
        format_exports,
        serve_foreground,
        start_background,
    )

    home = sdlocal_home()
    port = DEFAULT_PORT if port is None else port
    if background:
        state = start_background(home, port=port, runtime=runtime)
        click.echo(format_exports(exports(state.url, home)))
        click.echo(f"sdlocal serve: {state.url} (pid {state.pid}, log {home / 'serve.log'}); "
                   "stop it with `sdlocal serve stop`", err=True)
        return

    def ready(url: str) -> None:
        click.echo(format_exports(exports(url, home)))
        click.echo(f"sdlocal serve: {url}; Ctrl-C stops it (and the jobs it runs)", err=True)

    stop_event = threading.Event()
    with stop_on_signals(stop_event):
        stuck = serve_foreground(home, port=port, runtime=runtime, stop=stop_event, ready=ready,
                                 echo=lambda line: click.echo(line, err=True))
    if stuck:
        raise click.ClickException(f"jobs still running after the stop: {', '.join(stuck)}")


@serve.command("stop")
def serve_stop() -> None:
    """Stop the endpoint started with --background (its running jobs end Stopped)."""
    from sdlocal.launcher.s3.endpoint import sdlocal_home
    from sdlocal.launcher.serve.control import stop_background

    state = stop_background(sdlocal_home())
    click.echo(f"stopped sdlocal serve at {state.url} (pid {state.pid})" if state else "not running")


def _add_images_group() -> None:
    from sdlocal.launcher.cli.images import images

    cli.add_command(images)


_add_images_group()


def _sdk_shape(rows: list[dict[str, Any]], job_name: str) -> list[dict[str, Any]]:
    """The SDK's rule_job_summary(): DescribeTrainingJob's rule status entries, exactly (what
    `run --json` and `summary --json` print)."""
    from sdlocal.launcher.s3.endpoint import REGION
    from sdlocal.launcher.statuses.summary import sdk_summary

    return sdk_summary(rows, job_name, os.environ.get("AWS_DEFAULT_REGION") or REGION)


def _print_statuses(rows: list[dict[str, Any]], as_json: bool) -> None:
    from sdlocal.launcher.statuses.summary import format_table

    click.echo(json.dumps(rows, indent=1) if as_json else format_table(rows))


def main() -> None:
    cli(prog_name="sdlocal")
