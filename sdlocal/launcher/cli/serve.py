"""`sdlocal serve [stop]`: the local SageMaker endpoint for SDK scripts (launcher/serve/)."""
from __future__ import annotations

import threading

import click

from sdlocal.launcher.cli import options


@click.group(invoke_without_command=True)
@click.option("--port", type=click.IntRange(0, 65535), default=None,
              help="Port on 127.0.0.1 (default 8775; 0: a free one).")
@click.option("--background", is_flag=True, help="Start detached and return (stop it with `sdlocal serve stop`).")
@click.option("--runtime", type=click.Choice(["process", "docker", "auto"]), envvar="SDLOCAL_RUNTIME",
              default="auto", show_default=True, help="Where the jobs' training and evaluators run (as `run`).")
@options.host_limit_options
@click.option("--max-concurrent-jobs", type=click.IntRange(min=1), envvar="SDLOCAL_MAX_CONCURRENT_JOBS",
              help="Jobs run at once; the others wait in order, DescribeTrainingJob saying so (default: half "
                   "the CPUs, at least 1; env SDLOCAL_MAX_CONCURRENT_JOBS).")
@click.pass_context
def serve(ctx: click.Context, port: int | None, background: bool, runtime: str, host_cpus: str | None,
          host_memory: str | None, max_concurrent_jobs: int | None) -> None:
    """A local SageMaker endpoint (SageMaker training API, S3, CloudWatch Logs) for SDK v2/v3 scripts.

    Prints the exports a script needs (`eval "$(sdlocal serve --background)"`); with them an
    unchanged `PyTorch(..., rules=[...]).fit()` runs its job here, as `sdlocal run` would."""
    if ctx.invoked_subcommand is not None:
        return
    from sdlocal.launcher.job.run import stop_on_signals
    from sdlocal.launcher.serve.control import (
        DEFAULT_PORT,
        exports,
        format_exports,
        serve_foreground,
        start_background,
    )
    from sdlocal.launcher.settings import sdlocal_home

    home = sdlocal_home()
    port = DEFAULT_PORT if port is None else port
    if background:
        state = start_background(home, port=port, runtime=runtime, host_cpus=host_cpus, host_memory=host_memory,
                                 max_concurrent_jobs=max_concurrent_jobs)
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
                                 echo=lambda line: click.echo(line, err=True), host_cpus=host_cpus,
                                 host_memory=host_memory, max_concurrent_jobs=max_concurrent_jobs)
    if stuck:
        raise click.ClickException(f"jobs still running after the stop: {', '.join(stuck)}")


@serve.command("stop")
def serve_stop() -> None:
    """Stop the endpoint started with --background (its running jobs end Stopped)."""
    from sdlocal.launcher.serve.control import stop_background
    from sdlocal.launcher.settings import sdlocal_home

    state = stop_background(sdlocal_home())
    click.echo(f"stopped sdlocal serve at {state.url} (pid {state.pid})" if state else "not running")
