""""The platform": what SageMaker does around the training container.

It lays out the job directory (the process runtime's `/opt/ml`), writes `input/config/*.json`,
uploads the hook's output (and the system sampler's, `output/profiler`) continuously to the job's
S3 prefixes and writes `training_job_end.ts` after the final upload, whether training succeeded or
not. Channels and an S3 source tarball are staged by launcher/_staging.py, model and output data
published by launcher/_artifacts.py. S3 is reached through trial's Storage only.
"""
from __future__ import annotations

import json
import threading
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hook._step_record import RECORD_NAME
from launcher.spec import JobSpec
from trial.storage import Storage

END_MARKER = "training_job_end.ts"
MARKER = ".sdlocal-job"


@dataclass(frozen=True)
class JobDir:
    """`$SDLOCAL_HOME/jobs/<job>/` (or `--work-dir`): the job's `/opt/ml` for the process runtime."""

    root: Path

    @property
    def config_dir(self) -> Path:
        return self.root / "input" / "config"

    @property
    def tensors(self) -> Path:
        return self.root / "output" / "tensors"

    @property
    def profiler(self) -> Path:
        """The profiler's output (`/opt/ml/output/profiler`): the system sampler's
        `system/incremental/...` and the hook's `framework/pevents/...`."""
        return self.root / "output" / "profiler"

    @property
    def tensorboard(self) -> Path:
        return self.root / "output" / "tensorboard"

    @property
    def model(self) -> Path:
        return self.root / "model"

    @property
    def code(self) -> Path:
        """Where an s3:// SourceDir (the SDK's sourcedir.tar.gz) is unpacked."""
        return self.root / "code"

    @property
    def input_data(self) -> Path:
        return self.root / "input" / "data"

    @property
    def output_data(self) -> Path:
        return self.root / "output" / "data"

    @property
    def failure_file(self) -> Path:
        return self.root / "output" / "failure"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def record(self) -> Path:
        return self.root / "job.json"

    def config_file(self, name: str) -> Path:
        return self.config_dir / f"{name}.json"

    def rule_log(self, rule_name: str) -> Path:
        return self.logs / f"rule-{rule_name}.log"

    @property
    def marker(self) -> Path:
        """Written first into every job folder sdlocal makes: `--overwrite` removes only such folders."""
        return self.root / MARKER

    def made_by_sdlocal(self) -> bool:
        return self.marker.is_file() or self.record.is_file()  # job.json: folders made before the marker

    def create(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.marker.touch()
        for path in (self.config_dir, self.tensors, self.profiler, self.tensorboard, self.model, self.output_data,
                     self.logs):
            path.mkdir(parents=True, exist_ok=True)


def write_configs(spec: JobSpec, job_dir: JobDir, endpoint_url: str | None,
                  unevaluated: Collection[str] = ()) -> None:
    """The container's config files, plus `job.json` (what `sdlocal summary` needs later).
    `unevaluated`: the profiler rules this run starts no evaluator for."""
    job_dir.create()

    def dump(path: Path, data: Any) -> None:
        path.write_text(json.dumps(data, indent=2) + "\n")

    if spec.hook is not None:
        dump(job_dir.config_file("debughookconfig"), spec.hook.to_container_config(str(job_dir.tensors)))
    if spec.profiler is not None:
        dump(job_dir.config_file("profilerconfig"), spec.profiler.to_container_config(str(job_dir.profiler)))
    if spec.tensorboard is not None:
        dump(job_dir.config_file("tensorboardoutputconfig"), {"LocalPath": str(job_dir.tensorboard)})
    env = spec.training_environment()
    dump(job_dir.config_file("resourceconfig"), env.resource_config())
    dump(job_dir.config_file("inputdataconfig"), env.input_data_config())
    dump(job_dir.config_file("hyperparameters"), dict(spec.request_hyperparameters))  # as sent, as SageMaker does
    dump(job_dir.record, job_record(spec, endpoint_url, unevaluated))


def update_record(job_dir: JobDir, **fields: Any) -> None:
    """Add the job's outcome to `job.json` (fields whose value is None are left out)."""
    try:
        record = json.loads(job_dir.record.read_text())
    except (OSError, ValueError):
        record = {}
    record.update({k: v for k, v in fields.items() if v is not None})
    job_dir.record.write_text(json.dumps(record, indent=2) + "\n")


def job_record(spec: JobSpec, endpoint_url: str | None, unevaluated: Collection[str] = ()) -> dict[str, Any]:
    """`Evaluated` says whether a profiler rule got an evaluator (records written before profiler
    rules were evaluated lack it: none did); `summary` leaves out those that did not."""
    return {
        "TrainingJobName": spec.job_name,
        "DebugOutput": spec.debug_output,
        "S3EndpointUrl": endpoint_url,
        "DebugRules": [{"RuleConfigurationName": r.name, "RuleOutput": r.output} for r in spec.debug_rules],
        "ProfilerRules": [{"RuleConfigurationName": r.name, "RuleOutput": r.output, "Evaluated": r.name not in unevaluated}
                          for r in spec.profiler_rules],
    }


@dataclass(frozen=True)
class UploadTarget:
    local: Path
    storage: Storage  # where the files go, at their paths relative to `local`


def _rank(rel: str) -> int:
    """Upload order: an events file before the index file that points to it; collections early."""
    top = rel.split("/", 1)[0]
    return {"events": 0, "collections": 1, "index": 3}.get(top, 2)


def _closed_files(root: Path) -> list[Path]:
    """Closed files under root. `index/` is listed FIRST: the hook renames an events file before it
    creates its index file, so every index file seen here has its events file in the later listing."""
    if not root.is_dir():
        return []
    index_dir = root / "index"
    files = sorted(p for p in index_dir.rglob("*") if p.is_file()) if index_dir.is_dir() else []
    files += sorted(p for p in root.rglob("*") if p.is_file() and index_dir not in p.parents)
    return [p for p in files if not p.name.endswith(".tmp") and p.name not in (END_MARKER, RECORD_NAME)]


class Uploader:
    """Uploads closed files of each target (each file once; again if it changed), on a thread."""

    def __init__(
        self,
        targets: Iterable[UploadTarget],
        *,
        interval: float = 1.0,
        on_error: Callable[[Exception], None] | None = None,
    ) -> None:
        self.targets = list(targets)
        self.interval = interval
        self.on_error = on_error
        self.uploaded: list[str] = []  # storage URIs in upload order (for tests and logs)
        self._seen: dict[Path, tuple[int, int]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def sync_once(self) -> int:
        count = 0
        with self._lock:
            for target in self.targets:
                files = _closed_files(target.local)
                for path in sorted(files, key=lambda p: _rank(p.relative_to(target.local).as_posix())):
                    try:
                        st = path.stat()
                    except FileNotFoundError:
                        continue
                    signature = (st.st_size, st.st_mtime_ns)
                    if self._seen.get(path) == signature:
                        continue
                    rel = path.relative_to(target.local).as_posix()
                    try:
                        target.storage.write_file(rel, path)
                    except FileNotFoundError:
                        continue  # renamed away since the listing (a writer's rotation): the next pass has it
                    self._seen[path] = signature
                    self.uploaded.append(f"{target.storage.uri}/{rel}")
                    count += 1
        return count

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="sdlocal-uploader", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.sync_once()
            except Exception as e:  # keep going: the final upload retries and reports
                if self.on_error:
                    self.on_error(e)

    def finish(self, timeout: float = 60.0) -> int:
        """Stop the thread (deadline) and do the final upload; errors of the final upload propagate."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        return self.sync_once()


def write_end_marker(storage: Storage, folder: str = "") -> None:
    """`training_job_end.ts` at the storage's root (debug output) or in `folder` (the profiler's
    `system/` and `framework/`), written after the final upload: readers take it as the end."""
    storage.write(f"{folder.rstrip('/')}/{END_MARKER}" if folder else END_MARKER, b"")
