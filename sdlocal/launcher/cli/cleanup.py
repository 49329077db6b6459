"""`sdlocal jobs rm | prune`: old jobs out of $SDLOCAL_HOME, their folders and their objects in the
embedded S3 (launcher/job/cleanup.py)."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from sdlocal.launcher.cli import options
from sdlocal.launcher.cli.s3 import age_text, size_text

if TYPE_CHECKING:
    from sdlocal.launcher.job.cleanup import Removed
    from sdlocal.launcher.s3.store import DiskStore


@click.group("jobs")
def jobs_group() -> None:
    """Jobs kept in $SDLOCAL_HOME/jobs and their objects in the embedded S3 (`sdlocal s3 status` lists them)."""


@jobs_group.command("rm")
@click.argument("job_names", nargs=-1, required=True, callback=lambda ctx, param, names: tuple(
    options.job_name(ctx, param, n) for n in names))
def rm(job_names: tuple[str, ...]) -> None:
    """Delete JOB_NAMES: their job folders and their objects in the embedded S3 (a running job is refused)."""
    from sdlocal.launcher.job.cleanup import remove_job

    home, store = _home_and_store()
    for name in job_names:
        _said(remove_job(home, name, store))


@jobs_group.command("prune")
@click.option("--older-than", "older_than", required=True, metavar="AGE",
              help="Delete the jobs whose record last changed longer ago than AGE (7d, 12h, 30m, 90s, 2w).")
@click.option("--dry-run", is_flag=True, help="Only say which jobs would be deleted.")
def prune(older_than: str, dry_run: bool) -> None:
    """Delete old jobs: their folders and their objects in the embedded S3 (running jobs are kept)."""
    from sdlocal.launcher.job.cleanup import job_usage, parse_age, remove_job, stored_jobs
    from sdlocal.launcher.job.registry import find_running

    limit = parse_age(older_than)
    home, store = _home_and_store()
    old = [j for j in stored_jobs(home) if j.age_s > limit]
    kept = 0
    for job in old:
        if find_running(home, job.name) is not None:
            click.echo(f"kept job {job.name}: it is running")
            kept += 1
        elif dry_run:
            usage = job_usage(store, job)
            click.echo(f"would remove job {job.name} ({age_text(job.age_s)} old): {job.folder}, "
                       f"{usage.objects} object(s) ({size_text(usage.bytes)}) in the embedded S3")
        else:
            _said(remove_job(home, job.name, store))
    if len(old) == kept:
        click.echo(f"no job older than {older_than} to remove")


def _home_and_store() -> tuple[Path, DiskStore]:
    from sdlocal.launcher.s3.embedded import EmbeddedS3
    from sdlocal.launcher.s3.store import DiskStore
    from sdlocal.launcher.settings import sdlocal_home

    home = sdlocal_home()
    return home, DiskStore(EmbeddedS3(home).data_dir)


def _said(removed: Removed) -> None:
    job = removed.job
    where = (f"{removed.objects} object(s) ({size_text(removed.bytes)}) from the embedded S3" if job.in_embedded_s3
             else f"its objects in its S3 ({job.s3 or 'unknown'}) kept")
    click.echo(f"removed job {job.name}: {job.folder}, {where}")
