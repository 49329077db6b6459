"""Every `SDLOCAL_*` setting the launcher reads, and the labels it puts on what it starts: one place,
read at call time (never at import), so a test or a command can set them just before.

| variable | what | default |
|---|---|---|
| `SDLOCAL_HOME` | the folder of job folders, the embedded S3's state and data, `serve`'s state | `~/.sdlocal` |
| `SDLOCAL_RUNTIME` | `--runtime` of `run` and `serve`: `process`, `docker` or `auto` | `auto` |
| `SDLOCAL_S3` | `--s3`: `embedded` or `aws` (the only way to Amazon S3 besides an endpoint URL) | not set |
| `SDLOCAL_SOURCE_MAX_MEMBERS` | the most members a source archive (sourcedir.tar.gz) may have | 25,000 |
| `SDLOCAL_SOURCE_MAX_BYTES` | the most bytes a source archive may unpack to | 1 GiB |
| `SDLOCAL_S3_RETRY_S` | how long every S3 call rides out an outage (trial/storage/_retry.py reads it) | 120 |
| `SDLOCAL_MAX_CONCURRENT_JOBS` | `serve --max-concurrent-jobs`: jobs run at once, the others wait (launcher/serve/queue.py) | half the CPUs, at least 1 |
| `SDLOCAL_PRIVATE_OPT_ML` | the process runtime's trainings on a private `/opt/ml`: `auto` (where this machine allows it) or `off` (launcher/runtime/opt_ml_guard.py) | `auto` |

The evaluator's environment contract (`SDLOCAL_JOB_NAME`, `SDLOCAL_RULE_OUTPUT`, ...) is not a
setting: the launcher writes it for each evaluator from evaluator/contract.py.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

HOME = "SDLOCAL_HOME"
RUNTIME = "SDLOCAL_RUNTIME"
S3 = "SDLOCAL_S3"
MAX_CONCURRENT_JOBS = "SDLOCAL_MAX_CONCURRENT_JOBS"
S3_CHOICES = ("embedded", "aws")
PRIVATE_OPT_ML = "SDLOCAL_PRIVATE_OPT_ML"

# labels on every container, network and process sdlocal starts: who owns it
LABEL_JOB = "sdlocal.job"  # the TrainingJobName
LABEL_RUN = "sdlocal.run"  # one run of a job (docker runtime)
LABEL_ROLE = "sdlocal.role"  # training | rule | s3-gateway
LABEL_RULE = "sdlocal.rule"  # the RuleConfigurationName of an evaluator
LABEL_HOST = "sdlocal.host"  # the host (algo-1, algo-2, ...) of a training
LABEL_IMAGE = "sdlocal.image"  # on sdlocal's images: training | evaluator
GATEWAY_PORT = 9000  # the docker runtime's S3 gateway container listens here; the S3 endpoints accept it in Host


def _env(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def sdlocal_home(environ: Mapping[str, str] | None = None) -> Path:
    return Path(_env(environ).get(HOME) or Path.home() / ".sdlocal")


def private_opt_ml(environ: Mapping[str, str] | None = None) -> bool:
    """False when SDLOCAL_PRIVATE_OPT_ML is off (0, false, no): the process runtime then runs every
    training as on a machine that refuses mount namespaces."""
    return _env(environ).get(PRIVATE_OPT_ML, "auto").strip().lower() not in ("off", "0", "false", "no")


def s3_choice(environ: Mapping[str, str] | None = None) -> str | None:
    """SDLOCAL_S3 as given (checked where it is used, to name it in the error)."""
    return _env(environ).get(S3) or None


SOURCE_MAX_MEMBERS = "SDLOCAL_SOURCE_MAX_MEMBERS"
SOURCE_MAX_BYTES = "SDLOCAL_SOURCE_MAX_BYTES"


def positive_int(name: str, default: int, environ: Mapping[str, str] | None = None) -> int:
    """An integer setting; a value that is not a positive integer is an error naming the variable."""
    raw = _env(environ).get(name)
    if not raw:
        return default
    try:
        value = int(raw.replace("_", ""))
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError(f"{name}={raw!r} is not a positive integer")
    return value


def source_limits(environ: Mapping[str, str] | None = None) -> tuple[int, int]:
    """(members, unpacked bytes) a source archive may have."""
    return (positive_int(SOURCE_MAX_MEMBERS, 25_000, environ), positive_int(SOURCE_MAX_BYTES, 1 << 30, environ))
