"""The endpoint: a WSGI app in front of moto's. Requests whose `X-Amz-Target` is `SageMaker.*`
(the SDK's SageMaker client, JSON 1.1) are answered by `SageMakerApi`; the IAM and STS calls the
SDK v3 makes to check its role by launcher/serve/iam.py; everything else (S3, CloudWatch Logs and metrics, the rest of STS/IAM) by moto's server app, which
picks the service from the request's signature.
`ServeServer` runs it on a loopback port and owns the jobs it started."""
from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from sdlocal.launcher.job.model import RunOptions
from sdlocal.launcher.job.run import run_job
from sdlocal.launcher.runtime.docker_config import HostLimits
from sdlocal.launcher.s3.endpoint import DEFAULT_BUCKET, DUMMY_CREDENTIALS, REGION, S3Endpoint, ensure_bucket
from sdlocal.launcher.s3.guard import GATEWAY_PORT, LocalClientsOnly
from sdlocal.launcher.serve import iam
from sdlocal.launcher.serve.api import ApiError, SageMakerApi
from sdlocal.launcher.serve.iam import signing_service
from sdlocal.launcher.serve.jobs import ServedJob, job_folder
from sdlocal.launcher.serve.logs import ensure_log_group
from sdlocal.launcher.serve.queue import JobQueue
from sdlocal.launcher.spec.model import JobSpec

_TARGET_PREFIX = "SageMaker."
MAX_BODY_BYTES = 1 << 20  # a SageMaker API request (the service's own limits keep real ones under 100 KB)
MAX_JSON_DEPTH = 64


def _json_depth(value: Any) -> int:
    """How deeply `value` nests (iteratively: a deep document must not exhaust the stack here either)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(item, dict):
            stack += [(v, depth + 1) for v in item.values()]
        elif isinstance(item, list):
            stack += [(v, depth + 1) for v in item]
    return deepest


def read_body(environ: dict[str, Any]) -> bytes:
    """The request's body, within MAX_BODY_BYTES (a 413 ApiError over it); b"" when it has none."""
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise ApiError("SerializationException", "Content-Length is not a number") from None
    if length > MAX_BODY_BYTES:
        raise ApiError("ValidationException", f"the request body is {length:,} bytes: over the limit of "
                                              f"{MAX_BODY_BYTES:,} bytes", status=413)
    return bytes(environ["wsgi.input"].read(length)) if length > 0 else b""


def read_json_body(environ: dict[str, Any]) -> Any:
    """The request's JSON body, within MAX_BODY_BYTES and MAX_JSON_DEPTH; ApiError otherwise."""
    raw = read_body(environ)
    try:
        body = json.loads(raw or b"{}")
    except RecursionError:
        raise ApiError("SerializationException", f"the request body nests deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError:
        raise ApiError("SerializationException", "the request body is not JSON") from None
    if _json_depth(body) > MAX_JSON_DEPTH:
        raise ApiError("SerializationException", f"the request body nests deeper than {MAX_JSON_DEPTH} levels")
    return body
WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def _json_response(start_response: Callable[..., Any], status: int, body: Mapping[str, Any],
                   headers: list[tuple[str, str]] | None = None) -> list[bytes]:
    data = json.dumps(body).encode()
    reason = {200: "OK", 400: "Bad Request", 403: "Forbidden", 413: "Request Entity Too Large",
              500: "Internal Server Error"}.get(status, "")
    start_response(f"{status} {reason}", [("Content-Type", "application/x-amz-json-1.1"),
                                          ("Content-Length", str(len(data))), *(headers or [])])
    return [data]


def local_client(service: str, url: str) -> Any:
    """A client of this server's moto. Request compression off: botocore gzips a request body of
    10 KiB and more where the API allows it (PutMetricData: a job's metrics, batched while the
    machine is busy), and moto's server answers such a request with a 500 (BadGzipFile), so the
    job's metrics were lost whenever a batch grew that large."""
    import boto3
    from botocore.config import Config

    return boto3.client(service, endpoint_url=url, region_name=REGION,
                        aws_access_key_id=DUMMY_CREDENTIALS["AWS_ACCESS_KEY_ID"],
                        aws_secret_access_key=DUMMY_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
                        config=Config(disable_request_compression=True))


class Dispatcher:
    def __init__(self, api: SageMakerApi, moto_app: WsgiApp, echo: Callable[[str], None]) -> None:
        self.api = api
        self.moto_app = moto_app
        self.echo = echo

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        if not target.startswith(_TARGET_PREFIX):
            service = signing_service(environ.get("HTTP_AUTHORIZATION", ""))
            if service in ("iam", "sts"):  # the SDK v3's role checks, answered as for a permitted role
                try:
                    raw = read_body(environ)
                except ApiError as e:
                    return _json_response(start_response, e.status, {"__type": e.code, "message": e.message})
                answered = iam.answer(service, raw)
                if answered is not None:
                    start_response("200 OK", [("Content-Type", "text/xml"), ("Content-Length", str(len(answered)))])
                    return [answered]
                environ["wsgi.input"] = io.BytesIO(raw)  # moto reads it again
            return self.moto_app(environ, start_response)
        operation = target[len(_TARGET_PREFIX):]
        try:
            body = read_json_body(environ)
            if not isinstance(body, dict):
                raise ApiError("SerializationException", "the request body is not a JSON object")
            return _json_response(start_response, 200, self.api.call(operation, body))
        except ApiError as e:
            if operation != "DescribeTrainingJob":
                self.echo(f"SageMaker.{operation}: {e.code}: {e.message}")
            return _json_response(start_response, e.status, {"__type": e.code, "message": e.message},
                                  [("x-amzn-ErrorType", e.code)])
        except Exception as e:  # noqa: BLE001 - one request's bug must not end the server
            self.echo(f"SageMaker.{operation}: internal error: {type(e).__name__}: {e}")
            return _json_response(start_response, 500, {"__type": "InternalFailure", "message": str(e)})


class ServeServer:
    """The endpoint on `host:port` (0: a free port), its jobs and their clean end."""

    def __init__(self, home: Path, *, host: str = "127.0.0.1", port: int = 0, runtime: str = "auto",
                 options: RunOptions | None = None, echo: Callable[[str], None] = print,
                 host_limits: HostLimits | None = None, max_concurrent_jobs: int | None = None) -> None:
        self.home = home
        self.host = host
        self.runtime_kind = runtime
        self.host_limits = host_limits  # --host-cpus/--host-memory of every job (docker)
        self.options = options or RunOptions()
        self.echo = echo
        self.queue = JobQueue(max_concurrent_jobs)  # the jobs beyond its limit wait (launcher/serve/queue.py)
        self._lock = threading.Lock()
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
        from werkzeug.serving import WSGIRequestHandler, make_server

        class QuietHandler(WSGIRequestHandler):
            def log_request(self, *args: Any, **kwargs: Any) -> None:  # one line per S3 poll otherwise
                pass

        self.api = SageMakerApi(self._create_job, client=None)
        dispatcher = Dispatcher(self.api, DomainDispatcherApplication(create_backend_app), echo)
        self._guard = LocalClientsOnly(dispatcher, ports=(port, GATEWAY_PORT), on_refused=lambda m: echo(f"Warning: {m}"))
        self._server = make_server(host, port, self._guard, threaded=True, request_handler=QuietHandler)
        self.port = int(self._server.server_address[1])
        self._guard.ports.add(self.port)  # port 0: the one the system picked
        self.url = f"http://{host}:{self.port}"
        self.endpoint = S3Endpoint(self.url, "serve", dummy_credentials=True)
        self._thread = threading.Thread(target=self._server.serve_forever, name="sdlocal-serve", daemon=True)

    def client(self, service: str) -> Any:
        return local_client(service, self.url)

    def start(self) -> None:
        self._thread.start()
        s3 = self.client("s3")
        self.api.client = s3
        ensure_bucket(s3, DEFAULT_BUCKET)  # the SDK's DefaultS3Bucket (launcher/serve/control.py)
        ensure_log_group(self.client("logs"))

    def stop(self, timeout: float = 60.0) -> list[str]:
        """Stop the jobs still running (their rules end Stopped), then the server; the jobs that did
        not end within `timeout` are returned."""
        jobs = [j for j in self.api.jobs.values() if not j.status.ended]
        for job in sorted(jobs, key=lambda j: j.running):  # the waiting ones first: none starts now
            job.request_stop()
        deadline = time.monotonic() + timeout
        stuck = [j.name for j in jobs if not j.join(max(0.0, deadline - time.monotonic()))]
        self._server.shutdown()
        self._thread.join(10)
        return stuck

    # -- jobs --------------------------------------------------------------------------------------
    def _create_job(self, request: Mapping[str, Any], spec: JobSpec) -> ServedJob:
        from sdlocal.launcher.runtime.selection import check_distribution

        check_distribution(spec.distribution.kind, self.runtime_kind)  # the SDK's ValidationException
        job_dir = job_folder(self.home, spec.job_name)
        return ServedJob(request, spec, job_dir=job_dir, endpoint=self.endpoint, run=self._run_job,
                         logs=self.client("logs"), region=REGION, cloudwatch=self.client("cloudwatch"),
                         on_log_error=lambda message: self.echo(f"[{spec.job_name}] Warning: {message}"),
                         queue=self.queue)

    def _run_job(self, job: ServedJob) -> None:
        from sdlocal.launcher.runtime.selection import select_runtime

        def echo(line: str) -> None:
            for part in line.splitlines():
                self.echo(f"[{job.name}] {part}")

        spec = job.spec
        echo(f"CreateTrainingJob: {len(spec.debug_rules)} Debugger rule(s), "
             f"{len(spec.profiler_rules)} profiler rule(s)")
        for warning in spec.warnings:
            echo(f"Warning: {warning}")
        rules = spec.debug_rules + spec.profiler_rules
        runtime = select_runtime(self.runtime_kind, rule_images=[r.image for r in rules],
                                 training_image=spec.training_image, echo=echo, host_limits=self.host_limits,
                                 distribution=spec.distribution.kind)
        # the path `sdlocal run` takes: registered in SDLOCAL_HOME (`sdlocal stop`, `logs`, `summary`
        # find it), its stop file watched, the runtime closed at the end
        result = run_job(spec, job_dir=job.job_dir, endpoint=self.endpoint, runtime=runtime, options=self.options,
                         echo=echo, stop=job.stop, client=self.client("s3"), home=self.home,
                         on_lifecycle=job.attach)
        echo(f"{result.training_status}; rules: " + ", ".join(
            f"{r['RuleConfigurationName']} {r['RuleEvaluationStatus']}" for r in result.statuses))
