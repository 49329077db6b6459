"""`sdlocal summary | logs | stop`: a job's statuses, logs and stop, for jobs of `sdlocal run` and of
`sdlocal serve` alike (both register in $SDLOCAL_HOME/running while they run: launcher/job/run.py)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from sdlocal.launcher.cli import options
from sdlocal.launcher.cli.output import print_statuses, sdk_shape
from sdlocal.launcher.settings import LABEL_JOB


def job_endpoint(folder: Path, flag: str | None, choice: str | None) -> Any:
    """Where a job's statuses are: the S3 the flags name, else the one its record says the job used
    (`serve`'s endpoint, the embedded S3, an endpoint URL, Amazon S3), else the default choice."""
    from sdlocal.launcher.s3.endpoint import S3Endpoint, aws_credentials_present

    if flag or choice:
        return options.endpoint(flag, choice)
    from sdlocal.launcher.errors import JobError
    from sdlocal.launcher.job.record import read_record

    try:
        record = read_record(folder) or {}
    except JobError:
        record = {}  # said by the command that reads its rules
    url, source = record.get("S3EndpointUrl"), record.get("S3EndpointSource")
    if source == "aws":
        return options.endpoint(None, "aws")
    if source == "embedded" or not url:
        return options.endpoint(None, "embedded" if source == "embedded" else None)
    chosen = S3Endpoint(url, source or "flag", dummy_credentials=source == "serve" or not aws_credentials_present())
    chosen.check_answers()
    return chosen


@click.command()
@click.argument("job_name", callback=options.job_name)
@click.option("--s3-output-path", metavar="S3_URI",
              help="The job's S3OutputPath (default: from the local job record, else s3://sdlocal/jobs).")
@options.endpoint_option
@options.s3_option
@options.work_dir_option
@click.option("--json", "as_json", is_flag=True,
              help="Print the statuses as JSON in the SDK's rule_job_summary() shape (LastModifiedTime: ISO 8601).")
def summary(job_name: str, s3_output_path: str | None, s3_endpoint_url: str | None, s3_choice: str | None,
            work_dir: Path | None, as_json: bool) -> None:
    """The rules' evaluation statuses of JOB_NAME (Debugger rules, then profiler rules)."""
    from sdlocal.evaluator.rule import RuleKind
    from sdlocal.launcher.errors import JobError
    from sdlocal.launcher.job.record import describe_outcome, read_record, recorded_rules
    from sdlocal.launcher.statuses.summary import RuleRef, rule_job_summary, rules_of_job
    from sdlocal.trial.storage import open_storage

    folder = options.job_dir(job_name, work_dir).root
    client = job_endpoint(folder, s3_endpoint_url, s3_choice).client()

    def storage(uri: str) -> Any:
        return open_storage(uri, client=client)  # every call with the retry policy

    try:
        record = read_record(folder)
    except JobError:
        if s3_output_path is None:
            raise
        record = None  # the statuses come from the path given
    recorded = None if record is None or s3_output_path is not None else [
        RuleRef(r.name, r.output, RuleKind.PROFILER if r.profiler else RuleKind.DEBUGGER, r.evaluated)
        for r in recorded_rules(folder, record)]
    refs = rules_of_job(storage, job_name, output_path=s3_output_path, recorded=recorded)
    outcome = describe_outcome(job_name, record) if record is not None else None
    if outcome:
        click.echo(outcome, err=True)
    rows = rule_job_summary(refs, storage)
    print_statuses(sdk_shape(rows, job_name) if as_json else rows, as_json)


@click.command()
@click.argument("job_name", callback=options.job_name)
@click.option("--rule", "rule_name", metavar="NAME", help="The log of this rule's evaluator instead of training's.")
@click.option("--host", metavar="HOST", default="algo-1", show_default=True,
              help="Which host's training log, in a job of several hosts (algo-1, algo-2, ...).")
@options.work_dir_option
@click.option("--follow", "-f", is_flag=True,
              help="Keep printing the lines as they are written, until the job ends (as `tail -f`).")
def logs(job_name: str, rule_name: str | None, host: str, work_dir: Path | None, follow: bool) -> None:
    """Print the training log of JOB_NAME (one host's; or one rule evaluator's), for either runtime."""
    from sdlocal.launcher.job.registry import find_running
    from sdlocal.launcher.settings import sdlocal_home

    job_dir = options.job_dir(job_name, work_dir)
    running = follow and find_running(sdlocal_home(), job_name) is not None
    if not job_dir.root.is_dir() and not running:
        raise click.ClickException(f"unknown job {job_name}: no job folder at {job_dir.root}")
    path = job_dir.rule_log(rule_name) if rule_name else job_dir.training_log(host)
    if running:
        _follow(path, lambda: find_running(sdlocal_home(), job_name) is not None)
        return
    if not rule_name and not path.is_file() and job_dir.training_log().is_file():
        hosts = ["algo-1"] + sorted((p.name[len("training-"):-len(".log")] for p in job_dir.logs.glob("training-*.log")),
                                    key=lambda h: (len(h), h))
        raise click.ClickException(f"job {job_name} has no host {host!r} (its hosts: {', '.join(hosts)})")
    if not path.is_file():
        known = sorted(p.name[len("rule-"):-len(".log")] for p in job_dir.logs.glob("rule-*.log"))
        what = f"rule {rule_name!r}" if rule_name else "training"
        raise click.ClickException(f"job {job_name} has no {what} log (rules with logs: {', '.join(known) or 'none'})")
    click.echo(path.read_text(errors="replace"), nl=False)


def _follow(path: Path, running: Any, interval: float = 0.5) -> None:
    """Print `path`'s lines as they are written while `running()`; then the rest."""
    import time

    from sdlocal.launcher.cli.follow import FileTail

    tail = FileTail(path)
    while True:
        alive = running()  # asked before the read: what is written before it ends is printed below
        for line in tail.read(final=not alive):
            click.echo(line)
        if not alive:
            return
        time.sleep(interval)


@click.command()
@click.argument("job_name", callback=options.job_name)
@options.work_dir_option
@click.option("--timeout", type=float, default=60.0, show_default=True, callback=options.positive_seconds,
              help="Seconds to wait for the running launcher to stop the job.")
def stop(job_name: str, work_dir: Path | None, timeout: float) -> None:
    """Stop a running job from another terminal (its rules end `Stopped`, as with Ctrl-C).

    Works for jobs of `sdlocal run` and of `sdlocal serve`. With no live process running JOB_NAME,
    removes the job's leftover containers and network."""
    from sdlocal.launcher.job.registry import find_running, request_stop, wait_ended
    from sdlocal.launcher.settings import sdlocal_home

    home = sdlocal_home()
    running = find_running(home, job_name)
    if running is not None:
        request_stop(running.job_dir)
        if not wait_ended(home, running, timeout):
            raise click.ClickException(f"asked job {job_name} to stop; the process running it (pid {running.pid}) "
                                       f"is still running after {timeout:g} s")
        click.echo(f"stopped job {job_name}")
        return
    removed = _remove_job_containers(job_name)
    if removed:
        click.echo(f"job {job_name} had no running launcher; removed {', '.join(removed)}")
    elif options.job_dir(job_name, work_dir).root.is_dir():
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
        return remove_run(client, {LABEL_JOB: job_name})
    finally:
        client.close()
