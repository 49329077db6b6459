"""What the commands share: their common options, the parsing callbacks (each a usage error, exit
2, naming the option), and the lookups every command makes the same way (the S3 endpoint, a job's
folder)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from sdlocal.launcher.errors import LauncherError
from sdlocal.launcher.spec.overrides import parse_collection, parse_kv

# evaluator.watchdog.DEFAULT_RULE_TIMEOUT_S (not imported here: `sdlocal --help` stays quick; a test
# keeps the two equal)
DEFAULT_RULE_TIMEOUT_S = 300.0


def kv(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    try:
        return tuple(parse_kv(v) for v in values)
    except ValueError as e:
        raise click.BadParameter(str(e), ctx=ctx, param=param) from e


def collections(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> Any:
    try:
        return tuple(parse_collection(v) for v in values)
    except ValueError as e:
        raise click.BadParameter(str(e), ctx=ctx, param=param) from e


def positive_seconds(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """Timeouts and intervals: a number of seconds > 0 (inf: no limit), else one usage error."""
    if value is not None and not value > 0:  # also NaN
        raise click.BadParameter(f"{value:g} is not a number of seconds > 0", ctx=ctx, param=param)
    return value


def job_name(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """JOB_NAME of logs/stop/summary: a TrainingJobName, never a path (`../x` would leave the jobs folder)."""
    from sdlocal.launcher.spec.values import check_job_name

    try:
        return check_job_name(value, "JOB_NAME")
    except LauncherError as e:
        raise click.BadParameter(str(e).removeprefix("JOB_NAME: "), ctx=ctx, param=param) from e


endpoint_option = click.option(
    "--s3-endpoint-url", metavar="URL",
    help="S3 endpoint (MinIO, LocalStack, moto). Default: AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL, else the "
         "embedded S3 server.")
s3_option = click.option(
    "--s3", "s3_choice", type=click.Choice(["embedded", "aws"]), default=None,
    help="Which S3 without an endpoint URL: the embedded server, or Amazon S3 with your AWS credentials "
         "(only ever used when asked for here or with SDLOCAL_S3=aws). Default: env SDLOCAL_S3, else embedded.")
rule_timeout_option = click.option(
    "--rule-timeout", type=float, default=DEFAULT_RULE_TIMEOUT_S, show_default=True, callback=positive_seconds,
    help="Seconds one call of a rule's own code may run: the import of a custom rule file, its constructor, "
         "one step's invoke_at_step. Past it the rule ends Error (waiting for data does not count).")


def host_limit_options(command: Any) -> Any:
    """--host-cpus / --host-memory: each training container's limits (docker runtime)."""
    command = click.option("--host-memory", metavar="SIZE",
                           help="docker: memory limit of each training host's container, e.g. 4g (default: none); "
                                "with ResourceConfig.InstanceCount N, N containers fit this machine.")(command)
    return click.option("--host-cpus", metavar="N",
                        help="docker: CPU limit of each training host's container, e.g. 1.5 (default: none).")(command)


work_dir_option = click.option(
    "--work-dir", type=click.Path(file_okay=False, path_type=Path),
    help="The job directory (default $SDLOCAL_HOME/jobs/<job>, SDLOCAL_HOME defaults to ~/.sdlocal).")


def endpoint(flag: str | None, choice: str | None = None, *, check: bool = True) -> Any:
    """The S3 endpoint of the command (launcher/s3/endpoint.py), its first contact made: one that
    does not answer fails here, in seconds, before anything starts."""
    from sdlocal.launcher.s3.endpoint import resolve_endpoint

    chosen = resolve_endpoint(flag, choice)
    if check:
        chosen.check_answers()
    return chosen


def job_dir(name: str, work_dir: Path | None) -> Any:
    """The job's folder: `--work-dir`, else the folder of the running job of that name (either
    entry point registers it), else `$SDLOCAL_HOME/jobs/<job>`."""
    from sdlocal.launcher.job.registry import find_running
    from sdlocal.launcher.jobdir.folder import JobDir
    from sdlocal.launcher.settings import sdlocal_home

    if work_dir is not None:
        return JobDir(work_dir.resolve())
    home = sdlocal_home()
    running = find_running(home, name)
    return JobDir(running.job_dir if running is not None else (home / "jobs" / name).resolve())
