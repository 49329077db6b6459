"""Running a job: training and one evaluator per Debugger rule at the same time, the uploads, the
end marker, waiting for the evaluators, statuses for evaluators that could not write their own.

Stopping (Ctrl-C, SIGTERM, `stop` event): training and evaluators are stopped (SIGTERM, then
SIGKILL after the grace period), the end marker is written, rules that had not finished are
marked `Stopped`; no process is left behind.

A rule's StopTraining action (launcher/actions.py) stops only the training: the job ends
`Stopped` (`JobResult.stopped_by_rule`, not a failure), the end marker is written and the rules
finish their evaluation (the rule that fired ends IssuesFound).

Around the training, as SageMaker does: the source tarball and the channels are staged before it
starts (launcher/_staging.py); a training that completed or was stopped has its model and output
data published, a failed one gets a FailureReason (launcher/_artifacts.py).
"""
from __future__ import annotations

import contextlib
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from evaluator.actions import StopRequest
from launcher._artifacts import failure_reason, publish_folder, write_success
from launcher._staging import fetch_source, remove_staged, stage_channels
from launcher._values import split_s3_uri
from launcher.actions import StopRequestWatcher
from launcher.errors import JobError, SpecError
from launcher.platform import JobDir, Uploader, UploadTarget, update_record, write_configs, write_end_marker
from launcher.runtime import DataInput, Handle, RuleLaunch, Runtime, TrainingLaunch
from launcher.s3 import S3Endpoint, ensure_bucket
from launcher.spec import JobSpec, RuleSpec
from launcher.summary import RuleRef, rule_job_summary

_FINAL = ("IssuesFound", "NoIssuesFound", "Error", "Stopped")


@dataclass(frozen=True)
class RunOptions:
    poll_interval_s: float = 1.0  # evaluators' polling (SDLOCAL_POLL_INTERVAL_S)
    upload_interval_s: float = 1.0
    rule_timeout_s: float = 600.0  # how long evaluators may run on after training ended
    stop_grace_s: float = 10.0
    action_poll_interval_s: float = 1.0  # how often to look for rules' StopTraining requests
    collections_timeout_s: float | None = None
    overwrite: bool = False


@dataclass(frozen=True)
class JobResult:
    job_name: str
    training_exit_code: int | None
    stopped: bool  # stopped by the user (Ctrl-C, SIGTERM, `stop`)
    statuses: list[dict[str, Any]]
    stopped_by_rule: StopRequest | None = None  # a rule's StopTraining action stopped training
    failure_reason: str | None = None  # SageMaker's FailureReason of a failed training
    model_artifacts: str | None = None  # s3://.../output/model.tar.gz, once published

    @property
    def training_failed(self) -> bool:
        # A job stopped by a rule's action is `Stopped`, not `Failed` (the SageMaker SDK's wait
        # accepts Completed and Stopped); its rules finish their evaluation.
        if self.stopped_by_rule is not None and not self.stopped:
            return False
        return self.stopped or self.training_exit_code != 0

    @property
    def training_status(self) -> str:
        """TrainingJobStatus in SageMaker's words: Completed, Failed or Stopped."""
        if self.stopped or self.stopped_by_rule is not None:
            return "Stopped"
        return "Completed" if self.training_exit_code == 0 else "Failed"


@contextlib.contextmanager
def stop_on_signals(event: threading.Event) -> Iterator[None]:
    """SIGINT/SIGTERM set `event` (the job loop stops everything cleanly) instead of raising."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, lambda *_: event.set())
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_job(
    spec: JobSpec,
    *,
    job_dir: JobDir,
    endpoint: S3Endpoint,
    runtime: Runtime,
    options: RunOptions = RunOptions(),
    echo: Callable[[str], None] = print,
    stop: threading.Event | None = None,
    client: Any = None,
    clock: Callable[[], float] = time.monotonic,
) -> JobResult:
    stop = stop or threading.Event()
    client = client or endpoint.client()
    echo(endpoint.describe())
    _prepare(spec, job_dir, endpoint, client, options.overwrite)
    try:
        spec, data_inputs = _stage(spec, job_dir, client, stop, echo)
    except BaseException:
        remove_staged(job_dir.root)  # a half-staged job must not read as "already exists" next time
        raise
    spec = spec.with_uploaded_rule_code(lambda path, uri: _put_file(client, path, uri))
    write_configs(spec, job_dir, endpoint.url)
    if spec.profiler_rules:
        echo(f"Profiler rules are not evaluated yet: {', '.join(r.name for r in spec.profiler_rules)}")

    targets = [UploadTarget(job_dir.tensors, spec.debug_output)]
    if spec.tensorboard is not None:
        targets.append(UploadTarget(job_dir.tensorboard, spec.tensorboard.tensorboard_output))
    upload_errors: list[Exception] = []
    uploader = Uploader(client, targets, interval=options.upload_interval_s, on_error=upload_errors.append)
    child_env = tuple(sorted(endpoint.child_env().items()))
    handles: dict[str, Handle] = {}
    training: Handle | None = None
    exit_code: int | None = None
    stopped_by: StopRequest | None = None
    try:
        uploader.start()
        for rule in spec.debug_rules:
            handles[rule.name] = runtime.start_rule(_rule_launch(spec, rule, job_dir, options, child_env))
        training = runtime.start_training(_training_launch(spec, job_dir, child_env, data_inputs))
        echo(f"Training job {spec.job_name} started ({len(handles)} rule evaluator(s)); logs in {job_dir.logs}")
        watcher = StopRequestWatcher(client, spec.job_name, {r.name: r.output for r in spec.debug_rules},
                                     interval=options.action_poll_interval_s, clock=clock,
                                     on_ignored=lambda r: echo(_ignored_stop(r, spec.job_name)))
        while (exit_code := training.wait(0.2)) is None and not stop.is_set():
            if (stopped_by := watcher.poll()) is not None:
                break
        if stopped_by is not None:
            at = f" at step {stopped_by.step}" if stopped_by.step is not None else ""
            echo(f"Rule {stopped_by.rule_configuration_name} fired{at}: StopTraining action, stopping the training job ...")
            exit_code = training.stop(options.stop_grace_s)
            echo(f"Training job {spec.job_name} Stopped by rule {stopped_by.rule_configuration_name}; "
                 "the rules finish their evaluation")
        elif exit_code is None:
            echo("Stopping the training job ...")
            training.stop(options.stop_grace_s)
        else:
            echo(f"Training {'completed' if exit_code == 0 else f'failed (exit code {exit_code})'}")
    finally:
        # Whatever happened: stop training if still running, upload what exists, mark the end.
        # A stopped job stops its evaluators BEFORE the end marker (they must not read it as the end).
        if training is not None and training.poll() is None:
            training.stop(options.stop_grace_s)
        try:
            if stop.is_set() or training is None or (exit_code is None and stopped_by is None):
                _stop_rules(spec, handles, client, options, "Stopped", "Stopped: the training job was stopped")
        finally:
            uploader.finish()
            write_end_marker(client, spec.debug_output)
    result = JobResult(spec.job_name, exit_code, stop.is_set(), [], stopped_by)
    reason, artifacts = _after_training(spec, job_dir, client, result, training, echo)
    if not stop.is_set():
        _wait_rules(spec, handles, client, options, stop, clock)
    if upload_errors:
        echo(f"Warning: {len(upload_errors)} upload attempt(s) failed; last: {upload_errors[-1]}")
    refs = [RuleRef(r.name, r.output, r.kind) for r in spec.debug_rules + spec.profiler_rules]
    return replace(result, statuses=rule_job_summary(client, refs), failure_reason=reason, model_artifacts=artifacts)


def _stage(spec: JobSpec, job_dir: JobDir, client: Any, stop: threading.Event,
           echo: Callable[[str], None]) -> tuple[JobSpec, tuple[DataInput, ...]]:
    """The source tarball unpacked into the job's code folder, the channels under input/data."""
    job_dir.create()
    if spec.source_s3_uri is not None:
        fetch_source(client, spec.source_s3_uri, job_dir.code)
        if not (job_dir.code / spec.entry_point).is_file():
            raise SpecError("EntryPoint", f"{spec.entry_point!r} is not in {spec.source_s3_uri} "
                                          f"(unpacked into {job_dir.code})")
        echo(f"Source: {spec.source_s3_uri} unpacked into {job_dir.code}")
        spec = replace(spec, source_dir=job_dir.code)
    return spec, stage_channels(client, spec.channels, job_dir.input_data, stop=stop, echo=echo)


def _after_training(spec: JobSpec, job_dir: JobDir, client: Any, result: JobResult, training: Handle | None,
                    echo: Callable[[str], None]) -> tuple[str | None, str | None]:
    """(FailureReason, model artifacts URI): a failed training gets the first, a completed or stopped
    one has /opt/ml/model and /opt/ml/output/data published (SageMaker uploads them on stop too)."""
    reason = artifacts = None
    if result.training_failed and not result.stopped:
        env = spec.training_environment()
        reason = failure_reason(job_dir.failure_file, result.training_exit_code, spec.entry_point,
                                env.user_args(), training.last_log_lines(40) if training else [])
    elif training is not None:
        if result.training_exit_code == 0:
            write_success(job_dir.root / "output")
        try:
            publish_folder(client, job_dir.model, spec.model_artifacts, job_dir.root)
            publish_folder(client, job_dir.output_data, f"{spec.model_output}/output.tar.gz", job_dir.root)
            artifacts = spec.model_artifacts
            echo(f"Model artifacts: {artifacts}")
        except Exception as e:  # noqa: BLE001 - the rules still need their wait; say it and go on
            echo(f"Warning: could not publish the model artifacts to {spec.model_artifacts}: "
                 f"{' '.join(str(e).split())}")
    update_record(job_dir, TrainingJobStatus=result.training_status, FailureReason=reason,
                  ModelArtifacts={"S3ModelArtifacts": artifacts} if artifacts else None)
    return reason, artifacts


def _put_file(client: Any, path: Any, uri: str) -> None:
    bucket, key = split_s3_uri(uri)
    client.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())


def _ignored_stop(request: StopRequest, job_name: str) -> str:
    return (f"Rule {request.rule_configuration_name} requested StopTraining for jobs starting with "
            f"{request.training_job_prefix!r}: not {job_name}, ignored")


def _prepare(spec: JobSpec, job_dir: JobDir, endpoint: S3Endpoint, client: Any, overwrite: bool) -> None:
    """Refuse a job name already used (its job folder, or objects under its S3 prefixes that are not
    this job's inputs); with `overwrite`, remove them. The job's inputs are never counted nor
    deleted: the SDK uploads `<out>/<job>/source/sourcedir.tar.gz` under the job's own prefix."""
    if endpoint.source != "aws":
        outputs = [spec.debug_output, spec.model_output] + [r.output for r in spec.debug_rules]
        if spec.tensorboard is not None:
            outputs.append(spec.tensorboard.tensorboard_output)
        for bucket in dict.fromkeys(split_s3_uri(u)[0] for u in outputs):
            ensure_bucket(client, bucket)
    prefixes = [split_s3_uri(spec.job_output)]
    if not spec.model_output.startswith(spec.job_output + "/"):
        prefixes.append(split_s3_uri(spec.model_output))
    inputs = [(b, f"{p}/source/") for b, p in prefixes[:1]] + [_raw_split(u) for u in spec.input_uris()]

    def outputs_of(bucket: str, prefix: str) -> Iterator[str]:
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{prefix}/"):
            for obj in page.get("Contents", []):
                if not any(bucket == b and obj["Key"].startswith(k) for b, k in inputs):
                    yield obj["Key"]

    existing = any(next(outputs_of(b, p), None) is not None for b, p in prefixes)
    if (existing or job_dir.root.exists()) and not overwrite:
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
        for bucket, prefix in prefixes:
            keys = list(outputs_of(bucket, prefix))
            for i in range(0, len(keys), 1000):  # DeleteObjects takes 1000 keys at most
                client.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys[i:i + 1000]]})


def _raw_split(uri: str) -> tuple[str, str]:
    """`s3://bucket/key/` -> ("bucket", "key/"): an input's key or prefix exactly as given."""
    bucket, _, key = uri[len("s3://"):].partition("/")
    return bucket, key


def _training_launch(spec: JobSpec, job_dir: JobDir, env: tuple[tuple[str, str], ...],
                     data_inputs: tuple[DataInput, ...]) -> TrainingLaunch:
    return TrainingLaunch(
        job_name=spec.job_name, entry_point=spec.entry_point, source_dir=spec.source_dir,
        hyperparameters=tuple(spec.hyperparameters.items()), config_dir=job_dir.config_dir,
        model_dir=job_dir.model, log_path=job_dir.logs / "training.log", image=spec.training_image, env=env,
        training_env=spec.training_environment(), environment=tuple(spec.environment.items()),
        data_inputs=data_inputs,
    )


def _rule_launch(spec: JobSpec, rule: RuleSpec, job_dir: JobDir, options: RunOptions,
                 env: tuple[tuple[str, str], ...]) -> RuleLaunch:
    return RuleLaunch(
        job_name=spec.job_name, rule_name=rule.name, rule_parameters=tuple(rule.parameters.items()),
        debug_output=spec.debug_output, rule_output=rule.output, log_path=job_dir.rule_log(rule.name),
        profiler_output=spec.profiler.profiler_output if spec.profiler else None,
        poll_interval_s=options.poll_interval_s, collections_timeout_s=options.collections_timeout_s,
        image=rule.image, env=env, instance_type=rule.instance_type,
    )


def _wait_rules(spec: JobSpec, handles: dict[str, Handle], client: Any, options: RunOptions,
                stop: threading.Event, clock: Callable[[], float]) -> None:
    deadline = clock() + options.rule_timeout_s
    while any(h.poll() is None for h in handles.values()):
        if stop.is_set():
            _stop_rules(spec, handles, client, options, "Stopped", "Stopped: the job was stopped")
            return
        if clock() > deadline:
            details = f"ClientError: the evaluator did not finish within {options.rule_timeout_s:g}s after training ended"
            _stop_rules(spec, handles, client, options, "Error", details)
            return
        next(h for h in handles.values() if h.poll() is None).wait(0.2)
    for rule in spec.debug_rules:
        handle = handles.get(rule.name)
        if handle is not None and not _has_final_status(client, rule):
            last = " | ".join(handle.last_log_lines(5))
            details = (f"ClientError: the rule evaluator exited (code {handle.poll()}) without a final status. "
                       f"Last log lines: {last}")
            _write_status(spec, rule, client, "Error", details)


def _stop_rules(spec: JobSpec, handles: dict[str, Handle], client: Any, options: RunOptions,
                status: str, details: str) -> None:
    for handle in handles.values():
        handle.stop(options.stop_grace_s)
    for rule in spec.debug_rules:
        if rule.name in handles and not _has_final_status(client, rule):
            _write_status(spec, rule, client, status, details)


def _has_final_status(client: Any, rule: RuleSpec) -> bool:
    from launcher.summary import read_status

    try:
        current = read_status(client, rule.output)
    except ValueError:  # a torn or foreign status.json: not a final status
        return False
    return current is not None and current.get("RuleEvaluationStatus") in _FINAL


def _write_status(spec: JobSpec, rule: RuleSpec, client: Any, status: str, details: str) -> None:
    from evaluator.status import RuleStatus, Status, fake_job_arn, write_status
    from trial.storage import open_storage

    write_status(open_storage(rule.output, client=client),
                 RuleStatus(rule.name, Status(status), details, job_arn=fake_job_arn(spec.job_name, rule.name)))
