"""A job's folder: `$SDLOCAL_HOME/jobs/<job>/` (or `--work-dir`), the process runtime's `/opt/ml`
and the place of everything the platform keeps of a job (config files, local outputs, logs, the
job record). `JobDir` names its parts; jobdir/configs.py writes the config files and the record.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

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


