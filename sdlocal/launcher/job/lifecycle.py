"""One job run, from claiming its name to its rules' final statuses: `JobLifecycle`.

It owns every part a job starts and their cleanup, in one place:

    claim     the job name is free (job folder, S3 outputs); buckets of a local endpoint exist
    stage     an s3:// source tarball unpacked, the channels under input/data (launcher/job/staging.py)
    configure local custom rule files uploaded, input/config/*.json and job.json written
    start     uploader, one evaluator per rule configuration (Debugger rules, then the profiler
              rules the evaluator can run), training, system sampler (ProfilerConfig, not disabled);
              a job of several hosts: every host's training, uploads and sampler (launcher/job/hosts.py)
    wait      for the training, with its deadline (StoppingCondition.MaxRuntimeInSeconds), a stop (Ctrl-C,
              SIGTERM, `sdlocal stop`) or a rule's StopTraining request; evaluators that die
              meanwhile get Error at once, each rule's status change is said (launcher/job/rule_watch.py)
    end       ALWAYS, whatever happened: training stopped if it runs, sampler stopped (its last
              file closed), evaluators stopped when the job was stopped (before the end marker,
              which they would read as the end), final upload, then the end markers
              (debug-output, and profiler-output's system/ and framework/)
    publish   model and output data (or the FailureReason), job.json updated
    rules     wait for the evaluators (RunOptions.rule_finish_timeout_s); Error for those without a status
              (launcher/job/rule_watch.py)
    close     ALWAYS: evaluators still running stopped with a status, the runtime closed

Every wait goes through launcher/wait.py with a deadline; S3 is reached through trial's Storage
over one injected client (`self.storage(uri)`).
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sdlocal.evaluator.actions import StopTrainingRequest
from sdlocal.launcher.job.artifacts import publish_outputs
from sdlocal.launcher.job.evaluators import Evaluators, profiler_rule_runs
from sdlocal.launcher.job.hosts import (
    HostSamplers,
    host_launches,
    start_hosts,
    start_samplers,
    upload_targets,
)
from sdlocal.launcher.job.launches import check_container_settings, rule_launch
from sdlocal.launcher.job.model import DEFAULT_OPTIONS, JobResult, RunOptions
from sdlocal.launcher.job.prepare import claim_job_name, stage_inputs
from sdlocal.launcher.job.record import (
    MAX_RUNTIME_EXCEEDED,
    MAX_RUNTIME_MESSAGE,
    JobState,
    RuleStatus,
    new_record,
    update_record,
    write_record,
)
from sdlocal.launcher.job.rule_watch import RuleWatch
from sdlocal.launcher.job.steps_to_judge import few_steps_warnings
from sdlocal.launcher.job.stop_training import StopTrainingWatcher
from sdlocal.launcher.jobdir.configs import write_configs
from sdlocal.launcher.jobdir.folder import JobDir
from sdlocal.launcher.runtime import DataInput, Handle, Runtime
from sdlocal.launcher.s3.embedded import EmbeddedS3, EmbeddedWatchdog
from sdlocal.launcher.s3.endpoint import S3Endpoint
from sdlocal.launcher.sampler.sampler import (
    SystemSampler,
    make_sampler,
)
from sdlocal.launcher.settings import sdlocal_home
from sdlocal.launcher.spec.model import JobSpec, RuleSpec
from sdlocal.launcher.statuses.keeper import KeptStatus
from sdlocal.launcher.statuses.summary import RuleRef, rule_job_summary
from sdlocal.launcher.upload.uploader import Uploader
from sdlocal.launcher.wait import Deadline, wait_for
from sdlocal.trial.errors import one_line
from sdlocal.trial.profiler.names import FRAMEWORK_END_MARKER, SYSTEM_END_MARKER
from sdlocal.trial.storage import Retry, S3Storage, Storage, add_outage_listener, open_storage
from sdlocal.trial.writer import END_MARKER


def run_all(*steps: Callable[[], object]) -> None:
    """Run every step even when one fails; then raise the first failure."""
    first: BaseException | None = None
    for step in steps:
        try:
            step()
        except BaseException as e:  # noqa: BLE001 - cleanup goes on; the first error is raised below
            first = first or e
    if first is not None:
        raise first


class JobLifecycle:
    def __init__(
        self,
        spec: JobSpec,
        *,
        job_dir: JobDir,
        endpoint: S3Endpoint,
        runtime: Runtime,
        options: RunOptions = DEFAULT_OPTIONS,
        echo: Callable[[str], None] = print,
        stop: threading.Event | None = None,
        client: Any = None,
        clock: Callable[[], float] = time.monotonic,
        runs_profiler_rule: Callable[[RuleSpec], bool] = profiler_rule_runs,
        sampler_factory: Callable[..., SystemSampler] = make_sampler,
    ) -> None:
        self.spec = spec
        self.job_dir = job_dir
        self.endpoint = endpoint
        self.runtime = runtime
        self.options = options
        self.echo = echo
        self.stop = stop or threading.Event()
        self.client = client or endpoint.client()
        self.clock = clock
        self.sampler_factory = sampler_factory
        # every S3 call rides through outages (trial/storage/_retry.py); Ctrl-C ends a wait for S3;
        # a local endpoint that restarted empty gets its buckets back
        self.retry = Retry(cancel=self.stop, recreate_bucket=endpoint.source != "aws")
        # the rules' statuses, through which the launcher reads and writes them (put back if S3 loses
        # them): one keeper per started evaluator, polled by the uploader
        self.status_keepers: list[KeptStatus] = []
        self._keepers: dict[str, KeptStatus] = {}
        # what the job's state is, published as it moves on (launcher/job/record.py): `sdlocal serve`'s
        # DescribeTrainingJob and `sdlocal run`'s live line observe it
        self.state = JobState(tuple(r.name for r in spec.debug_rules + spec.profiler_rules))
        self._runnable = {r.name for r in spec.profiler_rules if runs_profiler_rule(r)}
        self.profiler_rules: tuple[RuleSpec, ...] = ()  # those with an evaluator (set by configure)
        self.evaluators = Evaluators(runtime, spec.job_name, self._keeper, stop_grace_s=options.stop_grace_s)
        self.uploader: Uploader | None = None
        self.sampler: SystemSampler | HostSamplers | None = None
        self.training: Handle | None = None
        self.upload_errors: list[Exception] = []
        # how the training ended
        self.exit_code: int | None = None
        self.stopped_by: StopTrainingRequest | None = None  # a rule's StopTraining action
        self.max_runtime_exceeded = False
        self.max_runtime_exceeded_at: str | None = None  # when the training was told to stop (ISO 8601)
        self.training_ended = False  # an outcome is known (else: an error cut the run short)
        self.uploaded_all = False
        # evaluators that die get Error at once, status changes said as they happen
        self.watch = RuleWatch(self.evaluators, self.statuses, job_name=spec.job_name, options=options,
                               echo=echo, clock=clock, stop=self.stop)

    # -- S3 through trial's storage ----------------------------------------------------------------
    def storage(self, uri: str) -> Storage:
        return open_storage(uri, client=self.client, retry=self.retry)

    def bucket(self, name: str) -> Storage:
        return S3Storage(name, "", client=self.client, retry=self.retry)

    def _keeper(self, uri: str) -> KeptStatus:
        keeper = self._keepers.get(uri)
        if keeper is None:
            keeper = self._keepers[uri] = KeptStatus(self.storage(uri))
            self.status_keepers.append(keeper)
        return keeper

    def rule_output(self, uri: str) -> Storage:
        """A rule's output as the launcher reads it: through its status keeper when its evaluator
        started, else with the retry policy (a profiler rule this run does not evaluate)."""
        return self._keepers.get(uri) or self.storage(uri)

    @property
    def max_runtime_s(self) -> float:
        """The training's deadline: RunOptions.max_runtime_s if set, else the request's StoppingCondition."""
        if self.options.max_runtime_s is not None:
            return self.options.max_runtime_s
        return float(self.spec.stopping.max_runtime_s)

    @property
    def profiling(self) -> bool:
        """System metrics are sampled (a ProfilerConfig without DisableProfiler)."""
        return self.spec.profiler is not None and self.spec.profiler.sampled

    @property
    def profiler_output_used(self) -> bool:
        return self.profiling or bool(self.profiler_rules)

    # -- the run -----------------------------------------------------------------------------------
    def run(self) -> JobResult:
        remove_listener = add_outage_listener(lambda line: self.echo(f"Warning: {line}"))
        watchdog = None
        if self.endpoint.source == "embedded" and self.endpoint.url:  # started again if it stops answering
            watchdog = EmbeddedWatchdog(EmbeddedS3(sdlocal_home()), self.endpoint.url, self.echo).start()
        try:
            return self._run()
        finally:
            if watchdog is not None:
                watchdog.stop()
            remove_listener()

    def _run(self) -> JobResult:
        check_container_settings(self.spec, self.runtime.isolates_network, self.echo)
        self.echo(self.endpoint.describe())
        claim_job_name(self.spec, self.job_dir, self.bucket, ensure_buckets=self.endpoint.source != "aws",
                       overwrite=self.options.overwrite)
        self.state.phase("Downloading", "Downloading input data")
        self.spec, data_inputs = stage_inputs(self.spec, self.job_dir, self.bucket, self.stop, self.echo)
        self.configure()
        try:
            try:
                self.start(data_inputs)
                self.wait_training()
            finally:
                self.end_training()
            self.warn_few_steps()
            result = JobResult(self.spec.job_name, self.exit_code, self.stop.is_set(), [], self.stopped_by,
                               max_runtime_exceeded=self.max_runtime_exceeded)
            reason, artifacts = self.publish(result)
            if not self.stop.is_set():
                self.watch.wait_rules()
        except BaseException as e:
            self.close(failure=e)
            raise
        self.close()
        if self.upload_errors:
            self.echo(f"Warning: {len(self.upload_errors)} upload attempt(s) failed; last: {self.upload_errors[-1]}")
        return replace(result, statuses=self.statuses(), failure_reason=reason, model_artifacts=artifacts)

    def configure(self) -> None:
        def upload(path: Path, uri: str) -> None:
            bucket, _, key = uri[len("s3://"):].partition("/")
            self.bucket(bucket).write_file(key, path)

        self.spec = self.spec.with_uploaded_rule_code(upload)
        self.profiler_rules = tuple(r for r in self.spec.profiler_rules if r.name in self._runnable)
        unevaluated = [r.name for r in self.spec.profiler_rules if r.name not in self._runnable]
        write_configs(self.spec, self.job_dir)
        write_record(self.job_dir.root, new_record(self.spec, self.endpoint.url, unevaluated, self.endpoint.source))
        stopping = self.spec.stopping
        update_record(self.job_dir.root, StoppingCondition={
            "MaxRuntimeInSeconds": stopping.max_runtime_s, "MaxWaitTimeInSeconds": stopping.max_wait_s,
            "MaxPendingTimeInSeconds": stopping.max_pending_s},
            EnableNetworkIsolation=self.spec.containers.network_isolation,
            EnableInterContainerTrafficEncryption=self.spec.containers.traffic_encryption)
        if unevaluated:
            self.echo(f"Profiler rules are not evaluated yet: {', '.join(unevaluated)}")

    def start(self, data_inputs: Mapping[str, tuple[DataInput, ...]]) -> None:
        spec = self.spec
        targets = upload_targets(spec, self.job_dir, self.storage, self.profiling)
        self.uploader = Uploader(targets, interval=self.options.upload_interval_s, on_error=self.upload_errors.append,
                                 echo=self.echo, keepers=self.status_keepers)
        self.uploader.start()
        env = tuple(sorted(self.endpoint.child_env().items()))
        for rule in spec.debug_rules + self.profiler_rules:
            self.evaluators.start(rule, rule_launch(self.spec, rule, self.job_dir, self.options, env))
        self.training = start_hosts(self.runtime, host_launches(spec, self.job_dir, env, data_inputs),
                                    grace=self.options.stop_grace_s)
        self.state.phase("Training", "Training image download completed. Training in progress.")
        hosts = f" on {len(spec.hosts)} hosts ({', '.join(spec.hosts)})" if spec.multi_host else ""
        launch = f", {spec.distribution.kind}" if spec.distribution.enabled else ""
        self.echo(f"Training job {spec.job_name} started{hosts} ({len(self.evaluators)} rule evaluator(s){launch}); "
                  f"logs in {self.job_dir.logs}")
        if self.profiling:
            self.sampler = start_samplers(self.sampler_factory, self.training, spec, self.job_dir, self.echo)

    def wait_training(self) -> None:
        spec, training, options = self.spec, self.training, self.options
        assert training is not None
        watcher = StopTrainingWatcher(spec.job_name, {r.name: self.storage(r.output) for r in spec.debug_rules},
                                     interval=options.action_poll_interval_s, clock=self.clock,
                                     on_ignored=lambda r: self.echo(_ignored_stop(r, spec.job_name)))
        def ended() -> tuple[str, Any] | None:
            code = training.poll()
            if code is not None:
                return "exited", code
            request = self.watch.look(watcher.poll)
            if request is not None:
                return "rule", request
            self.watch.check()
            return None

        max_runtime = self.max_runtime_s
        waited = wait_for(ended, Deadline.after(max_runtime, self.clock), interval=0.2,
                          pause=training.wait, stop=self.stop)
        if waited.stopped or (waited.value is not None and waited.value[0] == "rule"):
            self.state.phase("Stopping", "Stopping the training job")
        if waited.stopped:
            self.echo("Stopping the training job ...")
            training.stop(options.stop_grace_s)
        elif waited.timed_out:
            self.echo(f"Training job {spec.job_name}: {MAX_RUNTIME_EXCEEDED}: {MAX_RUNTIME_MESSAGE} "
                      f"(StoppingCondition.MaxRuntimeInSeconds: {max_runtime:g} s) Stopping it (SIGTERM, "
                      f"SIGKILL after {options.max_runtime_grace_s:g} s); the rules finish their evaluation")
            self.max_runtime_exceeded_at = _iso_now()
            self.exit_code = training.stop(options.max_runtime_grace_s)
            self.max_runtime_exceeded = True
        elif waited.value is not None and waited.value[0] == "rule":
            self.stopped_by = request = waited.value[1]
            at = f" at step {request.step}" if request.step is not None else ""
            self.echo(f"Rule {request.rule_configuration_name} fired{at}: StopTraining action, "
                      "stopping the training job ...")
            self.exit_code = training.stop(options.stop_grace_s)
            self.echo(f"Training job {spec.job_name} Stopped by rule {request.rule_configuration_name}; "
                      "the rules finish their evaluation")
        elif waited.value is not None:
            self.exit_code = waited.value[1]
            code = self.exit_code
            self.echo(f"Training {'completed' if code == 0 else f'failed (exit code {code})'}")
        self.training_ended = True

    def end_training(self) -> None:
        """Whatever happened: stop what runs, upload what exists, mark the end."""
        def stop_training() -> None:
            if self.training is not None and self.training.poll() is None:
                self.training.stop(self.options.stop_grace_s)

        def stop_sampler() -> None:
            if self.sampler is not None:
                self.sampler.stop()  # closes its last file: the final upload takes it

        def stop_rules_of_stopped_job() -> None:
            # BEFORE the end marker: a stopped job's evaluators must not read it as the end
            if self.stop.is_set() or self.training is None or not self.training_ended:
                self.evaluators.stop("Stopped", "Stopped: the training job was stopped")

        def final_upload() -> None:
            if self.uploader is not None:
                self.uploader.finish()
            self.uploaded_all = True

        def end_markers() -> None:
            if not self.uploaded_all:  # the data is incomplete: no marker says it is all there
                return
            # through the uploader: written again after the files if S3 loses them
            mark = self.uploader.write_marker if self.uploader is not None else (lambda st, key: st.write(key, b""))
            mark(self.storage(self.spec.debug_output), END_MARKER)
            if self.profiler_output_used:
                profiler = self.storage(self.spec.profiler_output)
                mark(profiler, SYSTEM_END_MARKER)
                mark(profiler, FRAMEWORK_END_MARKER)

        run_all(stop_training, stop_sampler, stop_rules_of_stopped_job, final_upload, end_markers)

    def warn_few_steps(self) -> None:
        """Rules whose collections were saved at fewer than 2 of the steps the training ran."""
        hook = self.spec.hook
        if hook is None or not self.spec.debug_rules or self.stop.is_set() or not self.training_ended:
            return
        for line in few_steps_warnings(self.spec.debug_rules, self.job_dir.tensors, hook.collections,
                                       hook.hook_parameters):
            self.echo(line)

    def publish(self, result: JobResult) -> tuple[str | None, str | None]:
        """(FailureReason, model artifacts URI): a failed training gets the first, a completed or
        stopped one has /opt/ml/model and /opt/ml/output/data published (SageMaker uploads them on
        stop too)."""
        if not result.training_failed:
            self.state.phase("Uploading", "Uploading generated training model")
        reason, artifacts = publish_outputs(self.spec, self.job_dir, self.training, result, self.storage, self.echo)
        transitions = None
        if result.secondary_status == MAX_RUNTIME_EXCEEDED:  # DescribeTrainingJob's last transition
            transitions = [{"Status": MAX_RUNTIME_EXCEEDED, "StartTime": self.max_runtime_exceeded_at,
                            "EndTime": _iso_now(), "StatusMessage": MAX_RUNTIME_MESSAGE}]
        update_record(self.job_dir.root, TrainingJobStatus=result.training_status, SecondaryStatus=result.secondary_status,
                      SecondaryStatusTransitions=transitions, FailureReason=reason,
                      ModelArtifacts={"S3ModelArtifacts": artifacts} if artifacts else None)
        self.state.phase(result.secondary_status, reason or "", result.training_status)
        return reason, artifacts

    def close(self, failure: BaseException | None = None) -> None:
        """Stop the evaluators still running (a stop during publishing, an error), close the runtime."""
        def stop_evaluators() -> None:
            if not self.evaluators.unfinished():
                return
            if failure is None:
                self.evaluators.stop("Stopped", "Stopped: the job was stopped")
            else:
                self.evaluators.stop("Error", f"ClientError: the launcher failed: {one_line(failure)}")

        def stop_uploader() -> None:
            if self.uploader is not None:
                self.uploader.close()

        try:
            run_all(stop_evaluators, stop_uploader, self.runtime.close)
        except Exception as e:  # noqa: BLE001
            if failure is None:
                raise
            self.echo(f"Warning: cleaning up after the error failed too: {one_line(e)}")

    def statuses(self) -> list[dict[str, Any]]:
        started = {r.name for r in self.profiler_rules}
        refs = [RuleRef(r.name, r.output, r.kind) for r in self.spec.debug_rules]
        refs += [RuleRef(r.name, r.output, r.kind, r.name in started) for r in self.spec.profiler_rules]
        rows = rule_job_summary(refs, self.rule_output)
        for row in rows:  # published: what serve's DescribeTrainingJob and the live line show
            self.state.rule(row["RuleConfigurationName"], RuleStatus(row["RuleEvaluationStatus"]),
                            str(row.get("StatusDetails") or ""), row.get("LastModifiedTime"))
        return rows


def _iso_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ignored_stop(request: StopTrainingRequest, job_name: str) -> str:
    return (f"Rule {request.rule_configuration_name} requested StopTraining for jobs starting with "
            f"{request.training_job_prefix!r}: not {job_name}, ignored")
