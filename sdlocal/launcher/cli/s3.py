"""`sdlocal s3 status | stop`: the embedded S3 server."""
from __future__ import annotations

from pathlib import Path

import click


@click.group()
def s3() -> None:
    """The embedded S3 server (a moto server shared by sdlocal commands)."""


@s3.command("status")
def s3_status() -> None:
    """Say whether the embedded S3 server runs, where, and what it keeps on disk."""
    from sdlocal.launcher.s3.embedded import EmbeddedS3
    from sdlocal.launcher.settings import sdlocal_home

    server = EmbeddedS3(sdlocal_home())
    state = server.running()
    click.echo(f"running at {state.url} (pid {state.pid})" if state else "not running")
    usage = server.usage()
    click.echo(f"data: {server.data_dir} ({usage.buckets} bucket(s), {usage.objects} object(s), "
               f"{size_text(usage.bytes)}; kept across restarts)")
    if usage.objects:
        _per_job(server.home, server.data_dir, usage.objects, usage.bytes)


def _per_job(home: Path, data_dir: Path, objects: int, size: int) -> None:
    """What each job of $SDLOCAL_HOME/jobs holds (oldest first), and what no job there does."""
    from sdlocal.launcher.job.cleanup import job_usage, stored_jobs
    from sdlocal.launcher.s3.store import DiskStore

    store = DiskStore(data_dir)
    for bucket in store.buckets():
        held = store.usage(bucket["name"])
        click.echo(f"  bucket {bucket['name']}: {held.objects} object(s), {size_text(held.bytes)}")
    for job in stored_jobs(home):
        held = job_usage(store, job)
        if held.objects:
            objects, size = objects - held.objects, size - held.bytes
            where = ", ".join(f"s3://{b}/{p}" for b, p in job.prefixes)
            click.echo(f"  job {job.name} ({age_text(job.age_s)} old): {held.objects} object(s), {size_text(held.bytes)} in {where}")
    if objects > 0:
        click.echo(f"  of no job in {home / 'jobs'}: {objects} object(s), {size_text(max(size, 0))}")
    click.echo("  (`sdlocal jobs rm JOB` or `sdlocal jobs prune --older-than 7d` delete old jobs and their objects)")


@s3.command("stop")
@click.option("--discard-data", is_flag=True, help="Also delete its buckets and objects (kept otherwise).")
def s3_stop(discard_data: bool) -> None:
    """Stop the embedded S3 server (its data is kept for its next start unless --discard-data)."""
    import shutil

    from sdlocal.launcher.s3.embedded import EmbeddedS3
    from sdlocal.launcher.settings import sdlocal_home

    server = EmbeddedS3(sdlocal_home())
    state = server.stop()
    click.echo(f"stopped the embedded S3 server at {state.url} (pid {state.pid})" if state else "not running")
    if discard_data:
        shutil.rmtree(server.data_dir, ignore_errors=True)
        click.echo(f"deleted its data ({server.data_dir})")
    elif server.data_dir.is_dir():
        click.echo(f"its data stays in {server.data_dir}")


def age_text(seconds: float) -> str:
    for unit, length in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= length:
            return f"{seconds / length:.1f}{unit}"
    return f"{seconds:.0f}s"


def size_text(n: int) -> str:
    if n < 1000:
        return f"{n} bytes"
    scale, unit = max(x for x in ((1e3, "KB"), (1e6, "MB"), (1e9, "GB")) if n >= x[0])
    return f"{n / scale:.1f} {unit}"
