"""A job's folder: `$SDLOCAL_HOME/jobs/<job>/` (or `--work-dir`), the process runtime's `/opt/ml`
and the place of everything the platform keeps of a job (config files, local outputs, logs, the
job record). `JobDir` names its parts; jobdir/configs.py writes the config files and the record.

A job of several hosts keeps them apart as SageMaker does (each host its own /opt/ml): algo-1's
is the job folder itself, algo-2's is `<job>/hosts/algo-2/` (`host_dir`), laid out the same; the
logs of every host are in the job's `logs/` (`training_log`: `training.log` for algo-1,
`training-algo-2.log`, ...), where `sdlocal logs --host` reads them.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

MARKER = ".sdlocal-job"
FIRST_HOST = "algo-1"
RECORD = "job.json"  # the job record: read and written by launcher/job/record.py only


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
        return self.root / RECORD

    def host_dir(self, host: str) -> JobDir:
        """The /opt/ml of `host`: the job folder for algo-1, `hosts/<host>/` for the others."""
        return self if host == FIRST_HOST else JobDir(self.root / "hosts" / host)

    def training_log(self, host: str = FIRST_HOST) -> Path:
        return self.logs / ("training.log" if host == FIRST_HOST else f"training-{host}.log")

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
        for path in (*self.opt_ml_folders(), self.logs):
            path.mkdir(parents=True, exist_ok=True)

    def opt_ml_folders(self) -> tuple[Path, ...]:
        """The folders of a host's /opt/ml the platform makes before training."""
        return (self.config_dir, self.tensors, self.profiler, self.tensorboard, self.model, self.output_data)

    def create_host(self, host: str) -> JobDir:
        """`host`'s /opt/ml made (algo-1's is the job folder, made by `create`); its JobDir."""
        folder = self.host_dir(host)
        for path in folder.opt_ml_folders():
            path.mkdir(parents=True, exist_ok=True)
        return folder


