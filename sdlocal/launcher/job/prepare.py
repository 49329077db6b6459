"""Before a job starts: its name claimed (`claim_job_name`) and its inputs staged (`stage_inputs`).

S3 is reached through trial's Storage: `bucket(name)` gives the storage at a bucket's root.
"""
from __future__ import annotations

import shutil
import threading
from collections.abc import Callable
from dataclasses import replace

from sdlocal.launcher.errors import JobError, SpecError
from sdlocal.launcher.job.staging import (
    Buckets,
    fetch_source,
    remove_staged,
    stage_channels,
    stage_host_channels,
)
from sdlocal.launcher.jobdir.folder import JobDir
from sdlocal.launcher.runtime import DataInput
from sdlocal.launcher.spec.model import JobSpec


def _bucket_key(uri: str) -> tuple[str, str]:
    """`s3://bucket/key/` -> ("bucket", "key/"): a key or prefix exactly as given."""
    bucket, _, key = uri[len("s3://"):].partition("/")
    return bucket, key


def _prefix(uri: str) -> tuple[str, str]:
    """`s3://bucket/a/b/` -> ("bucket", "a/b/"): a folder prefix, with its one trailing slash."""
    bucket, key = _bucket_key(uri)
    return bucket, key.strip("/") + "/"


def claim_job_name(spec: JobSpec, job_dir: JobDir, bucket: Buckets, *, ensure_buckets: bool,
                   overwrite: bool) -> None:
    """Refuse a job name already used (its job folder, or objects under its S3 prefixes that are not
    this job's inputs); with `overwrite`, remove them. The job's inputs are never counted nor
    deleted: the SDK uploads `<out>/<job>/source/sourcedir.tar.gz` under the job's own prefix.
    `ensure_buckets` (a local endpoint): create the buckets the job writes to."""
    if ensure_buckets:
        outputs = [spec.debug_output, spec.model_output, spec.profiler_output]
        outputs += [r.output for r in spec.debug_rules + spec.profiler_rules]
        if spec.tensorboard is not None:
            outputs.append(spec.tensorboard.tensorboard_output)
        for name in dict.fromkeys(_bucket_key(u)[0] for u in outputs):
            bucket(name).ensure_root()
    prefixes = [_prefix(spec.job_output)]
    # the model's and the profiler's outputs may live under other S3OutputPaths
    profiler_job = spec.profiler_output.rsplit("/", 1)[0]
    for uri in (spec.model_output, profiler_job):
        if not (uri + "/").startswith(spec.job_output + "/") and _prefix(uri) not in prefixes:
            prefixes.append(_prefix(uri))
    inputs = [(prefixes[0][0], f"{prefixes[0][1]}source/")] + [_bucket_key(u) for u in spec.input_uris()]

    def outputs_of(name: str, prefix: str) -> list[str]:
        return [key for key in bucket(name).list(prefix, include_tmp=True)
                if not any(name == b and key.startswith(k) for b, k in inputs)]

    found = {p: outputs_of(*p) for p in prefixes}
    if (any(found.values()) or job_dir.root.exists()) and not overwrite:
        raise JobError(
            f"Training job {spec.job_name} already exists ({spec.job_output} or {job_dir.root}); "
            "choose another --job-name or pass --overwrite"
        )
    if overwrite:
        if job_dir.root.exists():
            if not job_dir.root.is_dir() or (not job_dir.made_by_sdlocal() and any(job_dir.root.iterdir())):
                # --work-dir may point anywhere: never delete what sdlocal did not make
                raise JobError(f"--overwrite: {job_dir.root} is not a job folder made by sdlocal "
                               f"(no {job_dir.marker.name}); refusing to delete it")
            shutil.rmtree(job_dir.root)
        for (name, _), keys in found.items():
            bucket(name).delete_many(keys)


def stage_inputs(spec: JobSpec, job_dir: JobDir, bucket: Buckets, stop: threading.Event,
                 echo: Callable[[str], None]) -> tuple[JobSpec, dict[str, tuple[DataInput, ...]]]:
    """The source tarball unpacked into the job's code folder, the channels under each host's
    input/data (launcher/job/staging.py); a staging that fails leaves no job folder behind (it
    would read as "already exists" next time). The data inputs of each host."""
    try:
        job_dir.create()
        if spec.source_s3_uri is not None:
            fetch_source(bucket, spec.source_s3_uri, job_dir.code)
            if spec.script_mode and not (job_dir.code / spec.entry_point).is_file():
                raise SpecError("EntryPoint", f"{spec.entry_point!r} is not in {spec.source_s3_uri} "
                                              f"(unpacked into {job_dir.code})")
            echo(f"Source: {spec.source_s3_uri} unpacked into {job_dir.code}")
            spec = replace(spec, source_dir=job_dir.code)
        elif spec.code_in_job_folder:  # an algorithm or container command without SourceDir
            job_dir.code.mkdir(parents=True, exist_ok=True)
            spec = replace(spec, source_dir=job_dir.code)
        hosts = len(spec.hosts)
        first = stage_channels(bucket, spec.channels, job_dir.input_data, stop=stop, echo=echo, shard=(0, hosts))
        inputs = {spec.hosts[0]: first}
        for index, host in enumerate(spec.hosts[1:], start=1):
            inputs[host] = stage_host_channels(bucket, spec.channels, first, job_dir.input_data,
                                               job_dir.create_host(host).input_data, index, hosts, stop=stop,
                                               echo=_said_on(host, echo))
        return spec, inputs
    except BaseException:
        remove_staged(job_dir.root)
        raise


def _said_on(host: str, echo: Callable[[str], None]) -> Callable[[str], None]:
    return lambda line: echo(f"{host}: {line}")
